"""`rheo gate`: the quick gate passes on this engine, every part of it can fail (a control
that is not caught, a lossy matrix family, a stale corpus file), and its outputs (table,
--json, --junit, counterexample files) say what happened."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rheo.checks import gate
from rheo.checks.corpus import Control
from rheo.checks.outcome import PROFILES, Check, CheckResult
from rheo.checks.strategies import cases
from rheo.reference.generate import hashed_case

ROOT = Path(__file__).resolve().parent.parent
SMOKE = PROFILES["smoke"]


def rheo(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "rheo.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


def test_smoke_gate_passes_with_json_junit_and_counterexample_files(tmp_path):
    """Every check of the gate through the CLI, at the smoke profile's toy sizes (the quick
    profile's heavy samples run once, in tests/test_fastpath_statistical.py): every check
    passes, every negative control is caught with a counterexample file, named as in the
    corpus, that `rheo exact` reads as NOT lossless."""
    junit = tmp_path / "gate.xml"
    r = rheo("gate", "--profile", "smoke", "--json", "--junit", str(junit), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = json.loads(r.stdout)
    names = [c["name"] for c in out["checks"]]
    assert out["passed"] and out["summary"]["fail"] == 0
    assert all(c["verdict"] == "pass" for c in out["checks"]), [c for c in out["checks"] if c["verdict"] != "pass"]
    from rheo.checks.corpus import CONTROLS

    for control in CONTROLS:
        check = next(c for c in out["checks"] if c["name"] == f"control: {control.name}")
        assert Path(check["counterexample"]).name == f"control-{control.name}.json"  # the corpus's name
        saved = json.loads(Path(check["counterexample"]).read_text())
        assert saved["expected"]["lossless"] is False
        again = rheo("exact", check["counterexample"], "--json")
        assert (
            again.returncode == 1
            and json.loads(again.stdout)["max_abs_deviation"] == saved["expected"]["max_abs_deviation"]
        )
    assert {"fastpath: decision equality", "fastpath: cycle law"} <= set(names)
    assert sum(n.startswith("exact: ") for n in names) == len(gate.MATRIX_FAMILIES)
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == str(len(names)) and suite.get("failures") == "0"
    assert "[1/" in r.stderr  # a progress line per check
    print(f"smoke gate: {out['summary']}")


def test_a_control_that_is_not_caught_fails_the_gate(tmp_path):
    """A "control" whose variant is the correct algorithm cannot be caught: the gate must
    say so and fail (a gate that cannot fire proves nothing)."""
    harmless = Control("sample_last", "the correct verifier (cannot be caught)", cases(policies=("rheo",), max_depth=1))
    [res] = gate.run_checks([gate.control_check(harmless)], SMOKE, tmp_path)
    assert res.verdict == "fail" and "NOT CAUGHT" in res.detail


def test_a_stale_corpus_file_fails_the_gate(tmp_path, monkeypatch):
    saved = json.loads((ROOT / "cases" / "control-sample_last.json").read_text())
    saved["verify"] = "rheo"  # the saved case no longer exercises the bug
    (tmp_path / "control-sample_last.json").write_text(json.dumps(saved))
    monkeypatch.setattr(gate, "corpus_dir", lambda: tmp_path)
    from rheo.checks.corpus import CONTROLS_BY_NAME

    [res] = gate.run_checks([gate.control_check(CONTROLS_BY_NAME["sample_last"])], SMOKE, tmp_path / "out")
    assert res.verdict == "fail" and "no longer caught" in res.detail


def test_a_lossy_matrix_family_fails_with_a_case_file(tmp_path, monkeypatch):
    from rheo.casefile import builtin_examples

    lossy = {k: v for k, v in builtin_examples()["abc-constant"].items() if k not in ("name", "description")}
    monkeypatch.setattr(
        gate, "matrix_cases", lambda family, level: [hashed_case(3, 1, 1, policy="topk", K=2, budget=2), lossy]
    )
    [res] = gate.run_checks([gate.exact_matrix_check("rheo m=1")], SMOKE, tmp_path)
    assert res.verdict == "fail" and "instance 2 of 2" in res.detail
    r = rheo("exact", res.counterexample, "--json")
    assert r.returncode == 1, r.stderr


def test_matrix_covers_every_budget_temperature_sparse_and_beam():
    for family in gate.MATRIX_FAMILIES:
        got = gate.matrix_cases(family, "quick")
        at_depth_2 = [c for c in got if c["depth"] == 2 and c["beam"] == 3]
        assert {c["budget"] for c in at_depth_2} == set(range(1, 13))
        assert {c["temperature"] for c in got} == {"0", "1/2", "1"}
        assert {c.get("draft_top_k") for c in got} == {None, 3}
        assert {c["beam"] for c in got} == {1, 3}
    variants = gate.matrix_cases(gate.MATRIX_FAMILIES[-1], "quick")
    assert any(c.get("epsilon") == "1/10" for c in variants) and any("target_top_p" in c for c in variants)


def test_fastpath_checks_skip_without_torch_and_strict_fails(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    from rheo.cli import main

    code = main(["gate", "--only", "fastpath: cycle", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["checks"][0]["verdict"] == "skip"
    assert "pip install" in out["checks"][0]["detail"]
    assert main(["gate", "--only", "fastpath: cycle", "--strict", "--json"]) == 1


def test_a_crashing_check_is_a_failure(tmp_path):
    def boom(profile, progress):
        raise RuntimeError("kaput")

    [res] = gate.run_checks([Check("x", "g", boom)], SMOKE, tmp_path)
    assert res.verdict == "fail" and "kaput" in res.detail


def test_junit_xml_marks_failures_and_skips():
    results = [
        CheckResult("a", "g", "pass", 0.1, "fine"),
        CheckResult("b", "g", "fail", 0.2, "broke", "x.json"),
        CheckResult("c", "g", "skip", 0.0, "no torch"),
    ]
    root = ET.fromstring(gate.junit_xml(results))
    assert root.get("tests") == "3" and root.get("failures") == "1" and root.get("skipped") == "1"
    cases_ = {c.get("name"): c for c in root}
    assert "x.json" in cases_["b"].find("failure").text and cases_["c"].find("skipped") is not None


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--only", "no-such-check"], "--only"),
        (["--replay", "x.json"], "--replay"),
        (["--impl", "nocolon"], "--impl"),
        (["--impl", "no_such_module_xyz:Obj"], "cannot import"),
        (["--impl", "examples.loop_impl:Missing"], "no attribute"),
        (["--impl", "examples.loop_impl:np"], "neither build_tree nor verify"),
        (["--profile", "huge"], "invalid choice"),
    ],
)
def test_gate_bad_input_exits_2(args, needle):
    r = rheo("gate", *args)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_gate_help_teaches():
    r = rheo("gate", "--help")
    assert r.returncode == 0
    for needle in ("negative controls", "--impl", "--junit", "quick", "deep", "exit status"):
        assert needle in r.stdout


def test_deep_profile_is_larger_than_quick():
    q, d = PROFILES["quick"], PROFILES["deep"]
    assert d.search_examples > q.search_examples and d.fast_cycles > q.fast_cycles and d.fresh_random
    assert len(gate.matrix_cases("rheo m=1", "deep")) > len(gate.matrix_cases("rheo m=1", "quick"))


def test_a_fastpath_difference_is_saved_replayable(tmp_path, monkeypatch):
    """A (planted) difference fails the check; the saved file rebuilds the same example."""
    pytest.importorskip("torch")
    import rheo.checks.differential as differential
    from rheo.checks.decisions import RequestCheck

    real = differential.check_example
    monkeypatch.setattr(
        differential, "check_example", lambda example, device="cpu": [RequestCheck("differs", "planted")]
    )
    [res] = gate.run_checks([gate.fast_decisions_check()], SMOKE, tmp_path)
    assert res.verdict == "fail" and "planted" in res.detail
    FILE = json.loads(Path(res.counterexample).read_text())
    from rheo.reference import Params

    assert "Params.from_case(FILE['config'])" in FILE["replay"]
    checks = real({"case": (FILE["vocab_size"], Params.from_case(FILE["config"])), **FILE["example"]})
    assert len(checks) == 3 and all(ch.status in ("equal", "near") for ch in checks)


def test_a_fastpath_counterexample_file_of_the_earlier_format_still_replays():
    """Files written before the parameter schema was shared hold the FastConfig fields
    (``filters``, a float ``proxy``); their replay line builds a FastConfig from them."""
    pytest.importorskip("torch")
    from rheo.checks.differential import check_example
    from rheo.fastpath import FastConfig, TargetFilters

    c = {
        "K": 2,
        "depth": 2,
        "budget": 3,
        "policy": "rheo",
        "m": 0,
        "beam": None,
        "draft_top_k": None,
        "proxy": 0.6,
        "epsilon": 0.0,
        "tie_break": "slot",
        "verify": "rheo",
        "draft_law": "sampled",
        "filters": {"top_k": None, "top_p": 0.9, "min_p": None},
    }
    cfg = FastConfig(**{**c, "filters": TargetFilters(**c["filters"])})
    assert cfg.proxy.kind == "constant" and cfg.target_filters.top_p == 0.9
    checks = check_example({"case": (4, cfg), "seed": 3, "noise": 1.0, "zeros": 0.0, "temps": [1.0, 0.5, 0.0]})
    assert len(checks) == 3
