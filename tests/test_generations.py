"""Whole generations (the protocol's ``generate``; rheo.checks.protocol.generation): the
call read strictly, the case format's n_tokens, the generation cases, and both checks of
them (exact certification, rheo.checks.exact.generation; the n-token output law,
rheo.checks.statistics.generation_law), each shown to pass a lossless implementation
(examples/loop_generation.py's LoopGeneration) and to fail a lossy one (its StaleRootRow,
a cross-cycle bug that no single cycle shows)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rheo.casefile import load_case
from rheo.checks.cases.generations import GENERATION_CASES, generation_case, generation_cases
from rheo.checks.cases.matrix import read_case_dir
from rheo.checks.exact.generation import certify_generation, check_generation_exact
from rheo.checks.gate.checklist import impl_checks
from rheo.checks.protocol.generation import (
    call_generate,
    generation_logits_fns,
    generation_sequence_law,
    impl_generate,
    n_tokens_of,
)
from rheo.checks.protocol.inputs import law_instance
from rheo.checks.protocol.load import Implementation, ImplLoadError, load_implementation
from rheo.checks.protocol.outputs import BadOutput
from rheo.checks.statistics.generation_law import check_generation_law
from rheo.reference import CaseError
from rheo.reference.generate import hashed_case

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from examples.loop_generation import LoopGeneration, StaleRootRow  # noqa: E402

TOPK = generation_case(*GENERATION_CASES["quick"][3])  # n = 4, Top-K K = 2, V = 2: 65 runs
CHAIN5 = generation_case(*GENERATION_CASES["quick"][4])  # n = 5, a chain of one draft token, T = 3/2
GOOD, BAD = Implementation(LoopGeneration(), "good"), Implementation(StaleRootRow(), "bad")


def test_generation_cases_cover_every_prefix_a_generation_reads_and_are_valid():
    for level in ("smoke", "quick", "deep"):
        cases = generation_cases(level)
        assert len({c["name"] for c in cases}) == len(cases)
        for case in cases:
            inst = load_case(case)
            n = n_tokens_of(case)
            assert 3 <= n <= 5 and case["vocab_size"] <= 3
            law = generation_sequence_law(inst, n)  # reads the target at every reachable prefix < n
            assert abs(sum(law.values()) - 1) < 1e-12 and all(len(s) == n for s in law)
            assert case["draft"].keys() >= {k for k in case["target"]}  # the draft at every prefix too
    kinds = {c["name"].split()[2] for c in generation_cases("quick")}
    temps = {c["temperature"] for c in generation_cases("quick")}
    assert kinds == {"chain", "tree", "topk"} and "1" in temps and len(temps) > 1


def test_n_tokens_defaults_to_depth_plus_one_and_is_validated_with_one_line():
    case = hashed_case(2, 0, 2, policy="rheo", K=1, m=0, budget=2)
    assert n_tokens_of(case) == 3 and n_tokens_of({**case, "n_tokens": 5}) == 5
    load_case({**case, "n_tokens": 4})
    for bad, needle in [(0, "n_tokens: must be >= 1"), ("3", "n_tokens: must be of type integer"),
                        (10**7, "n_tokens: must be <= 1000000")]:  # fmt: skip
        with pytest.raises(CaseError) as e:
            load_case({**case, "n_tokens": bad})
        assert needle in str(e.value) and "\n" not in str(e.value)


def test_cases_dir_refuses_a_table_that_a_generation_of_n_tokens_would_leave(tmp_path):
    case = hashed_case(2, 0, 2, policy="rheo", K=1, m=0, budget=2)  # target prefixes up to length 2
    (tmp_path / "ok.json").write_text(json.dumps({**case, "n_tokens": 3}))
    assert read_case_dir(tmp_path)[0]["n_tokens"] == 3
    (tmp_path / "long.json").write_text(json.dumps({**case, "n_tokens": 4}))
    with pytest.raises(CaseError) as e:
        read_case_dir(tmp_path)
    text = str(e.value)
    assert "long.json" in text and "n_tokens = 4 needs every target prefix of length <= 3" in text
    assert "\n" not in text


def test_the_logits_are_paths_from_the_generation_start_and_past_n_minus_1_the_prefix_law():
    inst = load_case(TOPK)
    draft, target = generation_logits_fns(inst, 4)
    row = target([(0, 1, 1)])[0]
    assert row.tolist() == pytest.approx([float(x) for x in map(__import__("math").log, inst.target((0, 1, 1)))])
    assert (target([(0, 1, 1, 0, 1)]) == target([(0, 1, 1)])).all()  # tokens after the 4th never count
    single = load_case(hashed_case(2, 0, 2, policy="rheo", K=1, m=0, budget=2))  # draft up to length 1
    d, _ = generation_logits_fns(single, 3)
    assert (d([(1, 0)]) == d([(1,)])).all()  # a shorter draft table answers with its deepest law


class Emits:
    def __init__(self, out):
        self.out = out

    def generate(self, *_):
        if isinstance(self.out, Exception):
            raise self.out
        return self.out


@pytest.mark.parametrize(
    "out, needle",
    [([0, 1, 0], "must hold n_tokens = 4 tokens, got 3"), ([0, 1, 0, 1, 1], "must hold n_tokens = 4"),
     ([0, 1, 2, 0], "2 is outside the vocabulary 0..1"), ([0.0, 1.0, 0.0, 1.0], "must hold integers"),
     ({"tokens": [0, 1]}, "got 2"), (RuntimeError("boom"), "generate raised RuntimeError: boom")],
)  # fmt: skip
def test_a_generation_that_emits_a_malformed_answer_is_a_one_line_finding(out, needle):
    with pytest.raises(BadOutput) as e:
        impl_generate(Implementation(Emits(out), "x"), law_instance(TOPK), 4)
    assert needle in str(e.value) and "\n" not in str(e.value)
    assert call_generate(Implementation(Emits({"tokens": [1, 0, 1, 1]}), "x"), law_instance(TOPK), 4) == (1, 0, 1, 1)


def test_an_implementation_with_generate_is_loaded_and_judged_on_generations_too():
    impl = load_implementation("examples.loop_generation:LoopGeneration")
    assert impl.runs_generations and not impl.per_request and impl.provides() == "whole generations"
    assert [c.name for c in impl_checks(impl)] == [
        "impl: exact certification, whole generations (whole generations)",
        "impl: output law, whole generations (whole generations)",
    ]

    class Both(LoopGeneration):
        def cycle(self, *_):
            raise NotImplementedError

    both = Implementation(Both(), "both")
    assert both.provides() == "whole cycles and whole generations"
    names = [c.name for c in impl_checks(both)]
    assert "impl: exact certification (whole cycles and whole generations)" in names  # the single-cycle ones stay
    assert "impl: output law, whole generations (whole cycles and whole generations)" in names
    assert not any(
        "generations" in c.name for c in impl_checks(load_implementation("examples.loop_impl:LoopImplementation"))
    )
    with pytest.raises(ImplLoadError, match="has none of build_tree, verify, cycle, generate"):
        load_implementation("examples.loop_generation:np")


def test_generations_of_the_reference_loop_are_lossless_exactly_and_the_stale_root_row_is_not():
    for case in (TOPK, CHAIN5):
        good = certify_generation(GOOD, case)
        assert good.verdict == "lossless" and good.deviation < 1e-12, good.summary()
        assert set(good.law) <= set(generation_sequence_law(load_case(case), n_tokens_of(case)))
        bad = certify_generation(BAD, case)
        assert bad.verdict == "not lossless" and bad.deviation > 0.05, bad.summary()


def test_one_cycle_of_the_stale_root_row_is_right_only_the_generation_is_wrong():
    single = {**TOPK, "n_tokens": 1}  # one token: the first cycle's root row is the right one
    assert certify_generation(BAD, single).verdict == "lossless"


def test_the_exact_generation_check_passes_the_loop_and_fails_the_stale_root_row():
    good = check_generation_exact(GOOD, "smoke")
    assert good.verdict == "pass" and "lossless (exact) on 2 cases" in good.detail, good.detail
    bad = check_generation_exact(BAD, "smoke")
    assert bad.verdict == "fail" and "not lossless (exact)" in bad.detail, bad.detail
    assert bad.counterexample["check"] == "exact certification, whole generations"
    assert len(bad.counterexample["worst_sequence"]) == n_tokens_of(bad.counterexample["case"])


def test_the_exact_generation_check_reports_an_implementation_that_supports_nothing():
    class Nothing(LoopGeneration):
        def supports(self, config):
            return False

    out = check_generation_exact(Implementation(Nothing(), "n"), "smoke")
    assert out.verdict == "fail" and "nothing is proven" in out.detail


def test_the_generation_law_passes_the_loop_and_rejects_the_stale_root_row():
    good = check_generation_law(GOOD, 2000, level="smoke")
    assert good.verdict == "pass" and "lossless on 2 cases, each within detectable TV" in good.detail, good.detail
    bad = check_generation_law(BAD, 2000, level="smoke")
    assert bad.verdict == "fail" and "not lossless on" in bad.detail, bad.detail
    assert bad.counterexample["check"] == "output law, whole generations"
    assert all(
        len(w["sequence"]) == n_tokens_of(bad.counterexample["case"]) for w in bad.counterexample["worst_sequences"]
    )


def test_a_generation_that_crashes_is_a_finding_with_its_message():
    class Crashes(LoopGeneration):
        def generate(self, *args):
            raise RuntimeError("the cache is\nout of step")

    cert = certify_generation(Implementation(Crashes(), "c"), TOPK)
    assert cert.verdict == "crashed" and cert.detail == "generate raised RuntimeError: the cache is out of step"
    out = check_generation_exact(Implementation(Crashes(), "c"), "smoke")
    assert out.verdict == "fail" and "the implementation failed on" in out.detail


def test_the_gate_runs_the_generation_checks_and_replays_their_exact_counterexample(tmp_path):
    """Through the CLI and its supervised worker: both checks fail StaleRootRow with
    counterexample files; --replay reruns the exact one (1 on the bug, 0 on the fix)."""
    import subprocess

    def rheo(*args):
        cmd = [sys.executable, "-m", "rheo.cli", *args]
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)

    out = tmp_path / "out"
    r = rheo(
        "gate", "--impl", "examples.loop_generation:StaleRootRow", "--profile", "smoke", "--json", "--out", str(out)
    )
    assert r.returncode == 1, r.stderr
    report = json.loads(r.stdout)
    verdicts = {c["name"]: c["verdict"] for c in report["checks"]}
    assert verdicts == {
        "impl: exact certification, whole generations (whole generations)": "fail",
        "impl: output law, whole generations (whole generations)": "fail",
    }
    saved = out / "examples-loop-generation-stalerootrow-exact-generations.json"
    assert json.loads(saved.read_text())["replay"].startswith("rheo gate --impl examples.loop_generation:StaleRootRow")
    assert rheo("gate", "--impl", "examples.loop_generation:StaleRootRow", "--replay", str(saved)).returncode == 1
    assert rheo("gate", "--impl", "examples.loop_generation:LoopGeneration", "--replay", str(saved)).returncode == 0
