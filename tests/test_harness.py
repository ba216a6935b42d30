"""The --impl harness: the independent loop implementation in examples/ passes, each
example bug is caught with a shrunk, replayable counterexample, and the protocol's edges
(one entry point only, malformed output, crashes, unsupported configurations, an
implementation with its own randomness) are handled."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rheo.checks.harness import (
    Implementation,
    check_cycle_law,
    check_decisions,
    compare_decisions,
    float_instance,
    load_implementation,
)
from rheo.reference import Uniforms
from rheo.reference.generate import hashed_case

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from examples.buggy_impl import ReusedUniform, TokenTieBreak  # noqa: E402
from examples.loop_impl import LoopImplementation  # noqa: E402


def rheo(*args):
    return subprocess.run(
        [sys.executable, "-m", "rheo.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=600
    )


def test_correct_loop_implementation_passes(rheo_checker):
    """Through the pytest plugin's fixture: decision equality on 300 shrinkable cases and
    the cycle law on three cases."""
    decisions, law = rheo_checker.check(LoopImplementation())
    assert decisions.data["equal"] >= 150, decisions.detail
    assert all(case["detectable_tv"] < 0.04 for case in law.data.values()), law.detail


@pytest.mark.parametrize(
    "bug,needle", [("TokenTieBreak", "tree:"), ("ReusedUniform", "verify on the reference's tree")]
)
def test_each_example_bug_is_caught_by_the_gate(bug, needle, tmp_path):
    out = tmp_path / "out"
    r = rheo("gate", "--impl", f"examples.buggy_impl:{bug}", "--json", "--out", str(out))
    assert r.returncode == 1, r.stderr[-2000:]
    res = json.loads(r.stdout)
    dec = res["checks"][0]
    assert dec["verdict"] == "fail" and needle in dec["detail"]
    saved = json.loads(Path(dec["counterexample"]).read_text())
    assert saved["case"]["vocab_size"] <= 5 and saved["difference"] == dec["detail"].split(" (shrunk")[0]
    again = rheo("gate", "--impl", f"examples.buggy_impl:{bug}", "--replay", dec["counterexample"], "--json")
    assert again.returncode == 1 and json.loads(again.stdout)["status"] == "differs"
    fixed = rheo("gate", "--impl", "examples.loop_impl:LoopImplementation", "--replay", dec["counterexample"])
    assert fixed.returncode == 0 and fixed.stdout.startswith("equal")


def test_the_plugin_fixture_raises_with_the_counterexample(rheo_checker):
    with pytest.raises(AssertionError, match="counterexample: .*decision-equality.json"):
        rheo_checker.check(ReusedUniform())


def test_token_tie_break_shrinks_to_a_small_tie():
    """Shrunk to two paths with one score (the same two factors in either order) that the
    slot path and the token path order differently."""
    r = check_decisions(Implementation(TokenTieBreak(), "t"), 300)
    assert not r.passed and r.detail.startswith("tree:")
    case = r.counterexample["case"]
    assert case["depth"] <= 2 and case["vocab_size"] <= 5, case


def test_fragile_ties_are_set_aside_not_blamed():
    """A tie between q = 1/4 and 1/2 * 1/2 is exact in the reference, but a float
    implementation's softmax rounds 1/4 and 1/2 on its own, so a tree whose budget cuts
    between them is set aside. A tie between 1/2 * 1/4 and 1/4 * 1/2 (the same two factors
    from one vector, in either order) is exact for any float implementation: compared."""
    from rheo.checks.harness import fragile_tree
    from rheo.reference import UniformChooser
    from rheo.reference.tree import build_tree

    case = {
        "vocab_size": 3,
        "target": {"*": ["1/3", "1/3", "1/3"]},
        "draft": {"*": ["1/2", "1/4", "1/4"]},
        "policy": "topk",
        "K": 2,
        "depth": 2,
        "beam": 2,
    }
    u = Uniforms.random(np.random.default_rng(0), 2, 2, 2)
    for budget, fragile in ((2, True), (4, False)):  # cut between [1] and [0, 0]; between [0, 1] and [1, 0]
        inst = float_instance({**case, "budget": budget})
        assert fragile_tree(inst, u, build_tree(inst, UniformChooser(u))) is fragile, budget


class BuilderOnly:
    def __init__(self, inner):
        self.build_tree = inner.build_tree


class VerifierOnly:
    def __init__(self, inner):
        self.verify = inner.verify


@pytest.mark.parametrize("wrap,bug", [(BuilderOnly, TokenTieBreak), (VerifierOnly, ReusedUniform)])
def test_one_entry_point_is_enough(wrap, bug):
    good = Implementation(wrap(LoopImplementation()), "good")
    assert check_decisions(good, 120).passed
    assert check_cycle_law(good, 3000).passed
    assert not check_decisions(Implementation(wrap(bug()), "bad"), 300).passed


def test_an_implementation_of_the_other_part_is_not_blamed():
    """A buggy verifier offered only as a tree builder passes (its verifier is not used)."""
    assert check_decisions(Implementation(BuilderOnly(ReusedUniform()), "b"), 120).passed


def _case_and_uniforms():
    case = hashed_case(4, 3, 2, policy="rheo", K=3, m=1, budget=5, beam=2)
    inst = float_instance(case)
    return inst, Uniforms.random(np.random.default_rng(1), 3, 2, 2)


@pytest.mark.parametrize(
    "broken,needle",
    [
        (lambda t: {**t, "kinds": t["kinds"] + 5}, "kind"),
        (lambda t: {k: v for k, v in t.items() if k != "slots"}, "missing 'slots'"),
        (lambda t: {**t, "sample_probs": t["sample_probs"][:, :2]}, "sample_probs has shape"),
        (lambda t: {**t, "parents": (np.arange(len(t["parents"])) + 1) % len(t["parents"])}, "cycle"),
    ],
)
def test_malformed_trees_are_reported_not_crashed(broken, needle):
    class Broken(LoopImplementation):
        def build_tree(self, *a):
            return broken(super().build_tree(*a))

    inst, u = _case_and_uniforms()
    got = compare_decisions(Implementation(Broken(), "b"), inst, u)
    assert got.check.status == "differs" and needle in got.check.detail, got.check.detail


def test_a_crash_is_a_finding():
    class Crash(LoopImplementation):
        def verify(self, *a):
            raise IndexError("out of range")

    inst, u = _case_and_uniforms()
    got = compare_decisions(Implementation(Crash(), "c"), inst, u)
    assert got.check.status == "differs" and "IndexError: out of range" in got.check.detail


def test_unsupported_configurations_are_skipped_and_counted():
    class NoFilters(LoopImplementation):
        def supports(self, config):
            return config["target_top_p"] is None and config["target_top_k"] is None and config["target_min_p"] is None

    r = check_decisions(Implementation(NoFilters(), "nf"), 100)
    assert r.passed and r.data["unsupported"] > 0

    class Nothing(LoopImplementation):
        def supports(self, config):
            return False

    r = check_decisions(Implementation(Nothing(), "n"), 30)
    assert not r.passed and "nothing is proven" in r.detail


def test_own_randomness_runs_only_the_statistical_check():
    class OwnRng(LoopImplementation):
        follows_uniforms = False

    r = check_decisions(Implementation(OwnRng(), "o"), 10)
    assert r.passed and r.data["skipped"]


def test_load_implementation_by_file_path(monkeypatch):
    monkeypatch.chdir(ROOT)
    impl = load_implementation("examples/loop_impl.py:LoopImplementation")
    assert impl.builds_trees and impl.verifies and impl.provides() == "tree builder and verifier"


class NoTruncation(LoopImplementation):
    """Builder bug: ignores draft_top_k (ranks and draws from the whole draft law)."""

    def draft_law(self, logits, config):
        return super().draft_law(logits, {**config, "draft_top_k": None})


class UntemperedResidual(LoopImplementation):
    """Builder bug: draws the sample from (and reports) the untempered residual law."""

    def expand(self, parent, logits, config, temperature, u):
        return super().expand(parent, logits, config, 1.0, u)


class NoTargetFilters(LoopImplementation):
    """Verifier bug: the sampling filters (top-k, top-p, min-p) are not applied to the target law."""

    def target_law(self, logits, config, temperature):
        return super().target_law(
            logits, {**config, "target_top_k": None, "target_top_p": None, "target_min_p": None}, temperature
        )


@pytest.mark.parametrize("bug", [NoTruncation, UntemperedResidual, NoTargetFilters], ids=lambda c: c.__name__)
def test_more_realistic_bugs_are_caught(bug):
    r = check_decisions(Implementation(bug(), bug.__name__), 300)
    assert not r.passed, r.detail
    print(f"{bug.__name__}: {r.detail}")


def test_counterexample_files_are_named_by_implementation(tmp_path):
    """The README walkthrough: both buggy examples into one folder, then replay the first."""
    from rheo.checks.gate import Profile, impl_checks, run_checks
    from rheo.checks.harness import replay

    profile = Profile("t", "quick", 0, False, 0, 0, 300, 2000)
    files = {}
    for bug in ("TokenTieBreak", "ReusedUniform"):
        impl = load_implementation(f"examples.buggy_impl:{bug}")
        dec, _ = run_checks(impl_checks(impl), profile, tmp_path)
        assert dec.verdict == "fail"
        files[bug] = dec.counterexample
    assert files["TokenTieBreak"].endswith("examples-buggy-impl-tokentiebreak-decision-equality.json")
    assert len(set(files.values())) == 2
    assert (
        replay(load_implementation("examples.buggy_impl:TokenTieBreak"), files["TokenTieBreak"]).check.status
        == "differs"
    )
