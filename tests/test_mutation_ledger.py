"""bench/mutation_ledger.py: the verdicts kept across mutation runs (issue 24, item 5).

A kept verdict must drop out when mutmut's hash of its function changes (else a changed
function would keep an old kill), undecided mutants must not be stored, and a seeded tree must
hold only the files its run mutates. These run without mutmut: the meta files are written here.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    spec = importlib.util.spec_from_file_location("mutation_ledger", ROOT / "bench" / "mutation_ledger.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "LEDGER", tmp_path / "ledger")
    return module


def _meta(codes: dict[str, int | None], hashes: dict[str, str]) -> str:
    return json.dumps(
        {
            "exit_code_by_key": codes,
            "hash_by_function_name": hashes,
            "type_check_error_by_key": {},
            "durations_by_key": {},
            "estimated_durations_by_key": {},
        }
    )


def _workdir(root: Path, files: dict[str, str], only: str = '["src/rheo/reference/*"]') -> Path:
    for source, text in files.items():
        path = root / "repo" / "mutants" / f"{source}.meta"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "repo").mkdir(parents=True, exist_ok=True)
    (root / "repo" / "pyproject.toml").write_text(f"[tool.mutmut]\nonly_mutate = {only}\n")
    return root


N = "rheo.reference.numbers."


def test_save_keeps_decided_verdicts_and_drops_those_of_changed_functions(ledger: Any, tmp_path: Path) -> None:
    first = _workdir(
        tmp_path / "a",
        {
            "src/rheo/reference/numbers.py": _meta(
                {N + "x_f__mutmut_1": 1, N + "x_f__mutmut_2": 0, N + "x_g__mutmut_1": None, N + "xǁAǁb__mutmut_1": 1}
                | {N + "x_g__mutmut_2": 2, N + "x_g__mutmut_3": -15},  # interrupted, stopped from outside: no verdict
                {"x_f": "f1", "x_g": "g1", "xǁAǁb": "b1"},
            )
        },
    )
    (first / "rechecked.json").write_text(json.dumps({N + "x_f__mutmut_2": {"killed": True, "by": "t::x"}}))
    assert ledger.save(first) == 0
    kept = json.loads((tmp_path / "ledger" / "reference.json").read_text())
    assert kept["files"]["src/rheo/reference/numbers.py"]["exit_code_by_key"] == {
        N + "x_f__mutmut_1": 1,
        N + "x_f__mutmut_2": 0,
        N + "xǁAǁb__mutmut_1": 1,
    }  # the undecided x_g mutants are not stored
    assert kept["rechecked"] == {N + "x_f__mutmut_2": {"killed": True, "by": "t::x", "hash": "f1"}}

    # a later run: x_f changed (new hash, undecided), x_g decided now, xǁAǁb unchanged and not rerun
    second = _workdir(
        tmp_path / "b",
        {
            "src/rheo/reference/numbers.py": _meta(
                {N + "x_f__mutmut_1": None, N + "x_f__mutmut_2": None, N + "x_g__mutmut_1": 0}
                | {N + "xǁAǁb__mutmut_1": None},
                {"x_f": "f2", "x_g": "g1", "xǁAǁb": "b1"},
            )
        },
    )
    assert ledger.save(second) == 0
    kept = json.loads((tmp_path / "ledger" / "reference.json").read_text())
    assert kept["files"]["src/rheo/reference/numbers.py"]["exit_code_by_key"] == {
        N + "x_g__mutmut_1": 0,
        N + "xǁAǁb__mutmut_1": 1,
    }
    assert kept["rechecked"] == {}  # its function changed


def test_a_run_of_some_files_keeps_the_other_files_rechecks(ledger: Any, tmp_path: Path) -> None:
    """bench/mutants.sh reference/params.py saves only params.py's verdicts: the rechecks of
    numbers.py, a file that run did not cover, stand as they were."""
    P = "rheo.reference.params."
    first = _workdir(
        tmp_path / "a",
        {
            "src/rheo/reference/numbers.py": _meta({N + "x_f__mutmut_1": 0}, {"x_f": "f1"}),
            "src/rheo/reference/params.py": _meta({P + "x_p__mutmut_1": 0}, {"x_p": "p1"}),
        },
    )
    rechecks = {
        N + "x_f__mutmut_1": {"killed": True, "by": "t::f"},
        P + "x_p__mutmut_1": {"killed": True, "by": "t::p"},
    }
    (first / "rechecked.json").write_text(json.dumps(rechecks))
    assert ledger.save(first) == 0
    only_params = _workdir(
        tmp_path / "b",
        {"src/rheo/reference/params.py": _meta({P + "x_p__mutmut_1": None}, {"x_p": "p2"})},
        only='["src/rheo/reference/params.py"]',
    )
    assert ledger.save(only_params) == 0
    kept = json.loads((tmp_path / "ledger" / "reference.json").read_text())
    assert kept["rechecked"] == {N + "x_f__mutmut_1": {"killed": True, "by": "t::f", "hash": "f1"}}  # x_p changed
    assert kept["files"]["src/rheo/reference/numbers.py"]["exit_code_by_key"] == {N + "x_f__mutmut_1": 0}


def test_seed_writes_mutmuts_meta_files_for_the_mutated_files_only(ledger: Any, tmp_path: Path) -> None:
    done = _workdir(
        tmp_path / "a",
        {
            "src/rheo/reference/numbers.py": _meta({N + "x_f__mutmut_1": 1, N + "x_f__mutmut_2": 0}, {"x_f": "f1"}),
            "src/rheo/reference/verify.py": _meta({"rheo.reference.verify.x_v__mutmut_1": 33}, {"x_v": "v1"}),
        },
    )
    (done / "rechecked.json").write_text(json.dumps({N + "x_f__mutmut_2": {"killed": False, "by": None}}))
    ledger.save(done)

    tree = _workdir(tmp_path / "new", {}, only='["src/rheo/reference/numbers.py"]') / "repo"
    assert ledger.seed(tree, retry_survivors=False) == 0
    meta = json.loads((tree / "mutants" / "src/rheo/reference/numbers.py.meta").read_text())
    assert meta["exit_code_by_key"] == {N + "x_f__mutmut_1": 1, N + "x_f__mutmut_2": 0}
    assert meta["hash_by_function_name"] == {"x_f": "f1"}
    assert set(meta) == {  # exactly the keys mutmut's SourceFileMutationData.load pops
        "exit_code_by_key",
        "hash_by_function_name",
        "type_check_error_by_key",
        "durations_by_key",
        "estimated_durations_by_key",
    }
    assert not (tree / "mutants" / "src/rheo/reference/verify.py.meta").exists()  # not in only_mutate
    assert json.loads((tree.parent / "rechecked-ledger.json").read_text()) == {
        N + "x_f__mutmut_2": {"killed": False, "by": None}
    }

    again = _workdir(tmp_path / "retry", {}) / "repo"
    ledger.seed(again, retry_survivors=True)
    meta = json.loads((again / "mutants" / "src/rheo/reference/numbers.py.meta").read_text())
    assert meta["exit_code_by_key"] == {N + "x_f__mutmut_1": 1}  # the survivor is left for mutmut to run
    verify = json.loads((again / "mutants" / "src/rheo/reference/verify.py.meta").read_text())
    assert verify["exit_code_by_key"] == {}  # "no tests" is retried too
    assert not (again.parent / "rechecked-ledger.json").exists()


def test_seed_leaves_a_trees_own_results_alone(ledger: Any, tmp_path: Path) -> None:
    first = _meta({N + "x_f__mutmut_1": 1}, {"x_f": "f1"})
    ledger.save(_workdir(tmp_path / "a", {"src/rheo/reference/numbers.py": first}))
    own = _meta({N + "x_f__mutmut_1": 0}, {"x_f": "f1"})
    tree = _workdir(tmp_path / "b", {"src/rheo/reference/numbers.py": own}) / "repo"
    ledger.seed(tree, retry_survivors=False)
    assert (tree / "mutants" / "src/rheo/reference/numbers.py.meta").read_text() == own


def test_the_committed_ledger_is_well_formed(ledger: Any) -> None:
    for path in sorted((ROOT / "bench" / "mutation_results").glob("*.json")):
        kept = json.loads(path.read_text())
        assert kept["mutmut"] == ledger.MUTMUT
        for source, data in kept["files"].items():
            assert source.startswith(f"src/rheo/{path.stem}/") and source.endswith(".py")
            module = source[len("src/") : -len(".py")].replace("/", ".")
            for name, code in data["exit_code_by_key"].items():
                assert name.startswith(module + ".") and isinstance(code, int), (path, name)
                assert ledger._function(name) in data["hash_by_function_name"], (path, name)
