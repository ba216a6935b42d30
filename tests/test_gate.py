"""`rheo gate`: the quick gate passes on this engine, every part of it can fail (a control
that is not caught, a lossy matrix family, a stale corpus file), and its outputs (table,
--json, --junit, counterexample files) say what happened."""

import dataclasses
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rheo.checks import gate
from rheo.checks.cases.corpus import Control
from rheo.checks.cases.strategies import cases
from rheo.checks.gate import reference_checks
from rheo.checks.outcome import PROFILES, Check, CheckResult
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
    from rheo.checks.cases.corpus import CONTROLS

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
    monkeypatch.setattr(reference_checks, "corpus_dir", lambda: tmp_path)  # where the check looks
    from rheo.checks.cases.corpus import CONTROLS_BY_NAME

    [res] = gate.run_checks([gate.control_check(CONTROLS_BY_NAME["sample_last"])], SMOKE, tmp_path / "out")
    assert res.verdict == "fail" and "no longer caught" in res.detail


def test_a_lossy_matrix_family_fails_with_a_case_file(tmp_path, monkeypatch):
    from rheo.casefile import builtin_examples

    lossy = {k: v for k, v in builtin_examples()["abc-constant"].items() if k not in ("name", "description")}
    monkeypatch.setattr(
        reference_checks,
        "matrix_cases",
        lambda family, level: [hashed_case(3, 1, 1, policy="topk", K=2, budget=2), lossy],
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


def test_fastpath_checks_skip_without_torch_and_a_run_of_only_skips_fails(monkeypatch, capsys):
    """A skipped check says why (the install line); a run in which every check was skipped
    checked nothing, so it does not pass, --strict or not."""
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    from rheo.cli import main

    code = main(["gate", "--only", "fastpath: cycle", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["checks"][0]["verdict"] == "skip" and "pip install" in out["checks"][0]["detail"]
    assert code == 1 and out["passed"] is False and out["reason"] == gate.NOTHING_CHECKED
    assert main(["gate", "--only", "fastpath: cycle", "--strict", "--json"]) == 1
    capsys.readouterr()
    assert main(["gate", "--only", "fastpath: cycle"]) == 1
    assert "every check was skipped: nothing is proven" in capsys.readouterr().out


def test_the_verdict_skips_strict_and_nothing_checked():
    ok, skip, bad = (CheckResult(n, "g", v, 0.1, "d") for n, v in (("a", "pass"), ("b", "skip"), ("c", "fail")))
    assert gate.gate_verdict([ok, skip]) == (True, None)
    assert gate.gate_verdict([ok, skip], strict=True) == (False, "a check was skipped and --strict is set")
    assert gate.gate_verdict([skip]) == (False, gate.NOTHING_CHECKED)
    assert gate.gate_verdict([ok, bad]) == (False, "1 check failed")
    assert "gate FAILED (t): 0 passed, 0 failed, 1 skipped in 0.1 s: every check was skipped" in gate.render(
        [skip], "t"
    )
    assert "gate FAILED" in gate.render([ok, skip], "t", strict=True)
    root = ET.fromstring(gate.junit_xml([skip]))  # a CI system reading only the JUnit file sees the failure
    assert root.get("tests") == "2" and root.get("failures") == "1"
    assert root.find("testcase[@name='rheo gate: verdict']/failure").get("message") == gate.NOTHING_CHECKED
    assert ET.fromstring(gate.junit_xml([ok, skip])).get("failures") == "0"


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
        (["--cycles", "10"], "--cycles: give the implementation too"),
        (["--cases", "."], "--cases: give the implementation too"),
        (["--impl", "examples.loop_impl:LoopImplementation", "--cycles", "0"], "--cycles: must be a positive integer"),
        (["--impl", "examples.loop_impl:LoopImplementation", "--cycles", "-3"], "--cycles: must be a positive integer"),
        (["--impl", "examples.loop_impl:LoopImplementation", "--cycles", "many"], "invalid int value"),
        (["--tv", "0.1"], "--tv: give the implementation too"),
        (["--time-budget", "60"], "--time-budget: give the implementation too"),
        (["--impl", "examples.loop_impl:LoopImplementation", "--tv", "0"], "--tv: must be a total-variation"),
        (["--impl", "examples.loop_impl:LoopImplementation", "--tv", "2"], "--tv: must be a total-variation"),
        (["--impl", "examples.loop_impl:LoopImplementation", "--tv", "nan"], "--tv: must be a total-variation"),
        (["--impl", "examples.loop_impl:LoopImplementation", "--time-budget", "0"], "--time-budget: must be"),
        (["--impl", "examples.loop_impl:LoopImplementation", "--time-budget", "inf"], "--time-budget: must be"),
        (["--impl", "examples.loop_impl:LoopImplementation", "--cycles", "9", "--tv", "0.1"], "--cycles fixes"),
        (["--impl", "examples.loop_impl:LoopImplementation", "--cycles", "9", "--time-budget", "5"], "--cycles fixes"),
        (["--impl", "examples.loop_impl:LoopImplementation", "--cases", "no/such/dir"], "is not a folder"),
        (["--impl", "nocolon"], "--impl"),
        (["--impl", "no_such_module_xyz:Obj"], "cannot import"),
        (["--impl", "examples.loop_impl:Missing"], "no attribute"),
        (["--impl", "examples.loop_impl:np"], "has none of build_tree, verify, cycle"),
        (["--profile", "huge"], "invalid choice"),
    ],
)
def test_gate_bad_input_exits_2(args, needle):
    r = rheo("gate", *args)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "source,needle",
    [
        (
            "class Engine:\n    def __init__(self):\n        raise ValueError('needs a GPU')\n",
            "constructing Engine raised ValueError: needs a GPU",
        ),
        ("def broken(:\n", "syntax error"),
        ("import no_such_dependency_of_an_engine\n", "ModuleNotFoundError"),
    ],
    ids=["constructor", "syntax", "import"],
)
def test_an_implementation_that_cannot_be_loaded_exits_2_with_one_line_and_json(tmp_path, source, needle):
    path = _write(tmp_path, "engine_under_test.py", source)
    spec = f"{path}:Engine"
    r = rheo("gate", "--impl", spec)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert r.stdout == ""
    r = rheo("gate", "--impl", spec, "--json")
    assert r.returncode == 2 and json.loads(r.stdout) == {"error": lines[0].removeprefix("rheo: error: ")}
    if needle.startswith("constructing"):
        assert lines[0] == f"rheo: error: --impl {spec}: constructing Engine raised ValueError: needs a GPU"


def test_impl_by_file_path_from_another_directory(tmp_path):
    """examples/buggy_impl.py imports `examples.loop_impl`: the file is imported from its
    package root, so it works from any directory."""
    spec = f"{ROOT / 'examples' / 'buggy_impl.py'}:ReusedUniform"
    r = rheo("gate", "--impl", spec, "--profile", "smoke", "--only", "output", "--json", "--out", "o", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    law = json.loads(r.stdout)["checks"][0]
    assert law["verdict"] == "fail" and law["detail"].startswith("not lossless on ")
    assert (tmp_path / law["counterexample"]).is_file()


def test_only_decision_on_an_implementation_with_its_own_randomness_is_bad_input(tmp_path, monkeypatch, capsys):
    path = _write(
        tmp_path,
        "own_randomness_engine.py",
        "from examples.loop_impl import LoopImplementation\n\n"
        "class Engine(LoopImplementation):\n    follows_uniforms = False\n",
    )
    monkeypatch.syspath_prepend(str(ROOT))
    from rheo.cli import main

    code = main(["gate", "--impl", f"{path}:Engine", "--only", "decision", "--json", "--out", str(tmp_path)])
    out = json.loads(capsys.readouterr().out)
    # decision equality is not even listed for it: --only matches nothing, which is bad input
    assert code == 2 and "no check name contains 'decision'" in out["error"]
    assert "impl: exact certification" in out["error"] and "impl: output law" in out["error"]


def test_cases_flag_adds_the_users_cases_and_rejects_a_bad_file(tmp_path):
    from rheo.checks.cases import space

    case = hashed_case(3, 4, 1, policy="rheo", K=2, m=0, budget=2, temperature="1/2")
    _write(tmp_path / "good", "my-chain.json", json.dumps(case))
    r = rheo(
        "gate", "--impl", "examples.loop_impl:LoopImplementation", "--profile", "smoke", "--only", "output law (",
        "--cases", str(tmp_path / "good"), "--cycles", "300", "--json", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    law = json.loads(r.stdout)["checks"][0]
    drawn = space.select(lambda c: True, "statistical", "smoke").cases  # the loop example supports everything
    assert law["data"]["cycles"] == 300 and "my-chain" in law["data"]["cases"]
    assert len(law["data"]["cases"]) == len(drawn) + 1
    assert "my-chain: lossless within detectable TV" in law["detail"]
    bad = _write(tmp_path / "bad", "broken.json", json.dumps({**case, "K": 0}))
    r = rheo("gate", "--impl", "examples.loop_impl:LoopImplementation", "--cases", str(tmp_path / "bad"), "--json")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and str(bad) in lines[0] and "K" in lines[0], r.stderr
    assert json.loads(r.stdout)["error"] == lines[0].removeprefix("rheo: error: ")
    _write(tmp_path / "gap", "gap.json", json.dumps({**case, "target": {"": case["target"][""]}}))
    r = rheo("gate", "--impl", "examples.loop_impl:LoopImplementation", "--cases", str(tmp_path / "gap"))
    assert r.returncode == 2 and "gap.json" in r.stderr and 'target["' in r.stderr, r.stderr


def test_cases_only_runs_the_users_cases_alone(tmp_path):
    case = hashed_case(3, 4, 1, policy="rheo", K=2, m=0, budget=2, temperature="1/2")
    _write(tmp_path / "mine", "my-chain.json", json.dumps(case))
    r = rheo(
        "gate", "--impl", "examples.loop_impl:LoopImplementation", "--profile", "smoke", "--only", "impl:",
        "--cases", str(tmp_path / "mine"), "--cases-only", "--cycles", "300", "--json", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    exact = next(c for n, c in checks.items() if "exact certification" in n)
    assert [c["case_name"] for c in exact["data"]["cases"]] == ["my-chain"] and "search" not in exact["data"]
    law = next(c for n, c in checks.items() if n.startswith("impl: output law ("))
    assert list(law["data"]["cases"]) == ["my-chain"]
    r = rheo("gate", "--impl", "examples.loop_impl:LoopImplementation", "--cases-only")
    assert r.returncode == 2 and "--cases-only: give the cases too (--cases DIR)" in r.stderr


class SpecLoop:
    """The loop implementation, declaring that it implements docs/spec.md's algorithm."""

    implements_spec = True

    def __init__(self):
        from examples.loop_impl import LoopImplementation

        self.inner = LoopImplementation()
        self.build_tree, self.verify = self.inner.build_tree, self.inner.verify


def test_the_cycle_law_check_is_listed_only_for_implementations_of_the_spec(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from examples.loop_impl import LoopImplementation
    from rheo.checks.protocol.load import Implementation

    names = [c.name for c in gate.impl_checks(Implementation(LoopImplementation(), "l"))]
    assert names == [
        "impl: decision equality (tree builder and verifier)",
        "impl: exact certification (tree builder and verifier)",
        "impl: output law (tree builder and verifier)",
        "impl: output law, beyond exact reach (tree builder and verifier)",
        "impl: real vocabulary sizes, exactly (tree builder and verifier)",
        "impl: rows without a law (tree builder and verifier)",
    ]
    spec = gate.impl_checks(Implementation(SpecLoop(), "s"))
    assert [c.name for c in spec][-1] == "impl: cycle law (tree builder and verifier)"
    [res] = gate.run_checks(spec[-1:], dataclasses.replace(SMOKE, impl_cycles=2000), Path("unused"))
    assert res.verdict == "pass" and res.detail.startswith("same cycle law as the reference on 3 cases"), res.detail


def test_impl_matrix_covers_the_configuration_space_with_small_cases():
    from rheo.casefile import load_case
    from rheo.checks.cases.matrix import LEVELS, filter_boundaries, impl_matrix, output_law_cases

    for level in LEVELS:
        matrix = impl_matrix(level)
        names = [c["name"] for c in matrix]
        assert len(set(names)) == len(names)
        assert all(3 <= c["vocab_size"] <= 4 and c["depth"] <= 2 and c["budget"] <= 6 for c in matrix if c["depth"] < 3)
        assert all(5 <= c["vocab_size"] <= 6 and c["budget"] <= 6 for c in matrix if c["depth"] == 3)
        assert {c["temperature"] for c in matrix} == {"0", "1/3", "1/2", "1", "3/2"}
        for c in matrix:
            load_case(c)  # valid; T = 3/2 only in float64
            assert (c["temperature"] == "3/2") == (c.get("arithmetic") == "float64")
        spread = output_law_cases(level)
        assert all(c in matrix for c in spread) and all(c["temperature"] != "0" for c in spread)
        assert not any(filter_boundaries(c) for c in spread)  # float engines would round those either way
        kinds = {c["name"].split()[0] for c in spread}
        assert kinds == {"chain", "tree", "topk"}
    quick = impl_matrix("quick")
    assert len(output_law_cases("smoke")) == 3 and len(output_law_cases("quick")) == 6
    chains = [c for c in quick if c["K"] == 1]
    assert chains and all(c["policy"] == "rheo" and c["m"] == 0 for c in chains)
    trees = [c for c in quick if c["policy"] == "rheo" and c["K"] == 3]
    assert {c["m"] for c in trees} == {0, 1, 2} and any(c["policy"] == "topk" for c in quick)
    assert {c["budget"] for c in trees if c["depth"] == 1} == {2, 3}  # below and at the pool size (K = 3)
    for key in ("target_top_k", "target_top_p", "target_min_p"):
        assert any(c.get(key) is not None for c in quick) and any(c.get(key) is None for c in quick)
    assert {c.get("draft_top_k") is None for c in quick} == {True, False}
    assert len(impl_matrix("smoke")) < len(quick) < len(impl_matrix("deep"))
    assert len([c for c in quick if c["depth"] == 3]) == 4  # some depth-3 cases, V 5-6


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
    import rheo.checks.differential.fastpath as differential
    from rheo.checks.differential.decisions import RequestCheck

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
    from rheo.checks.differential.fastpath import check_example
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


def test_counterexample_names_for_implementation_files_are_short_and_kept_apart(tmp_path):
    """--impl path/file.py:Object names its files by the file's stem and the object (not a
    mangled absolute path); a second file of the same name and object gets a short hash of
    its path instead of overwriting the first one's counterexample. Module specs keep their
    names."""
    from rheo.checks.gate.run import impl_stem

    first, second = tmp_path / "a" / "mine.py", tmp_path / "b" / "mine.py"
    assert impl_stem(f"{first}:Buggy") == ("mine-buggy", str(first.resolve()))
    assert impl_stem("examples.buggy_impl:ReusedUniform") == ("examples-buggy-impl-reuseduniform", None)

    from rheo.checks.outcome import Outcome

    def run(spec):
        stem, owner = impl_stem(spec)
        check = Check(
            "x", "implementation", lambda p, g: Outcome("fail", "planted", {"check": "x"}), None, f"{stem}-x", owner
        )
        [res] = gate.run_checks([check], SMOKE, tmp_path / "out")
        return Path(res.counterexample)

    one, again, two = run(f"{first}:Buggy"), run(f"{first}:Buggy"), run(f"{second}:Buggy")
    assert one.name == again.name == "mine-buggy-x.json"  # stable across runs
    assert two.name.startswith("mine-buggy-x-") and len(two.stem) == len("mine-buggy-x-") + 6
    assert json.loads(one.read_text())["implementation_file"] == str(first.resolve())
    assert json.loads(two.read_text())["implementation_file"] == str(second.resolve())


def test_tv_and_time_budget_size_the_output_law_checks_and_the_json_states_what_each_case_reached(tmp_path):
    """--tv sizes each case to detect that TV (the fewest cycles that do), --time-budget to
    a pilot's rate; each case's data says its cycles and the detectable TV reached."""
    r = rheo(
        "gate", "--impl", "examples.loop_impl:LoopImplementation", "--profile", "smoke", "--only", "beyond exact",
        "--tv", "0.3", "--json", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    [check] = json.loads(r.stdout)["checks"]
    assert "sized to detect TV 0.3" in check["detail"], check["detail"]
    for case in check["data"]["cases"].values():
        assert case["sized_by"] == "tv" and case["cycles"] == case["cycles_for_tv"] and case["detectable_tv"] <= 0.3
    r = rheo(
        "gate", "--impl", "examples.loop_impl:LoopImplementation", "--profile", "smoke", "--only", "output law (",
        "--time-budget", "4", "--json", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    [check] = json.loads(r.stdout)["checks"]
    assert "sized to a 4 s budget" in check["detail"] and check["seconds"] < 30, check["detail"]
    for case in check["data"]["cases"].values():
        assert case["sized_by"] == "time_budget" and case["cycles"] >= 200 and case["pilot_cycles_per_second"] > 0
        assert 0 < case["detectable_tv"] < 1
