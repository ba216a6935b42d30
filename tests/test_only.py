"""``rheo gate --only TEXT`` names checks exactly (``rheo.checks.gate.checklist.select_only``):
a check's name, its part before " (", or that part without "impl: "; then the short forms
("exact": exact certification); then the leading words of names (a group: "control",
"fastpath"); only then, as before, any check whose name contains TEXT, said on stderr and
in the ``only`` key of --json.

The bug these catch: the substring form alone made ``--only exact`` also run "impl: output
law, beyond exact reach" and ``--only 'output law'`` every output-law check (beyond exact
reach, batched); asserting only "the wanted check ran" would pass on it, so each test
asserts the whole list of what ran."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from examples.loop_generation import LoopGeneration
from examples.loop_impl import LoopImplementation
from rheo.checks.gate.checklist import gate_checks, impl_checks, only_note, select_only
from rheo.checks.protocol.load import Implementation
from rheo.reference.generate import hashed_case

ROOT = Path(__file__).resolve().parent.parent
IMPL = "examples.loop_impl:LoopImplementation"
EXACT = "impl: exact certification (tree builder and verifier)"
# the names of one implementation that had every check (per request, whole generations, batched)
NAMES = [c.name for c in impl_checks(Implementation(LoopImplementation(), "loop"))] + [
    c.name for c in impl_checks(Implementation(LoopGeneration(), "gen"))
]
NAMES += ["impl: output law, batched (verifier)", "impl: large vocabulary, batched (verifier)"]
ENGINE = [c.name for c in gate_checks()]


def _only(text: str, names: list[str] = NAMES) -> list[str]:
    return select_only(names, text)[0]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("exact", [EXACT]),
        ("exact certification", [EXACT]),
        ("output law", ["impl: output law (tree builder and verifier)"]),
        ("Output  Law", ["impl: output law (tree builder and verifier)"]),
        ("output law, beyond exact reach", ["impl: output law, beyond exact reach (tree builder and verifier)"]),
        ("beyond exact reach", ["impl: output law, beyond exact reach (tree builder and verifier)"]),
        ("output law, batched", ["impl: output law, batched (verifier)"]),
        ("impl: exact certification", [EXACT]),
        (EXACT, [EXACT]),
        ("decision", ["impl: decision equality (tree builder and verifier)"]),
        ("output law (", ["impl: output law (tree builder and verifier)"]),
    ],
)
def test_only_names_one_kind_of_check(text, expected):
    assert _only(text) == expected


def test_only_leading_words_name_a_group_and_the_old_substring_form_still_works():
    assert _only("output") == [n for n in NAMES if n.startswith("impl: output law")]
    assert len(_only("output")) == 4  # the output law, beyond exact reach, whole generations, batched
    assert _only("impl:") == NAMES
    whole = [n for n in NAMES if "whole generations" in n]
    assert _only("exact certification, whole generations") == whole[:1]
    matched, how = select_only(NAMES, "beyond exact")
    assert how == "substring" and matched == ["impl: output law, beyond exact reach (tree builder and verifier)"]
    matched, how = select_only(NAMES, "law")
    assert how == "substring" and len(matched) == len([n for n in NAMES if "law" in n]) > 1
    note = only_note("law", matched)
    assert all(n in note for n in matched) and "--only 'output law'" in note
    assert select_only(NAMES, "no-such-check") == ([], None)


def test_only_on_the_engines_gate_keeps_its_groups():
    """Without --impl: "control" and "fastpath" (CI, README) and "exact" (the exact matrix)
    are the leading words of their groups; "fastpath: designed exact ties" is no exact check."""
    assert (
        _only("control", ENGINE) == [n for n in ENGINE if n.startswith("control: ")]
        and len(_only("control", ENGINE)) > 5
    )
    assert _only("fastpath", ENGINE) == [n for n in ENGINE if n.startswith("fastpath: ")]
    assert _only("exact", ENGINE) == [n for n in ENGINE if n.startswith("exact: ")]
    assert _only("exact: rheo m=0", ENGINE) == ["exact: rheo m=0"]  # not the epsilon family that starts so
    assert _only("exact: rheo m=1 with sampling parameters", ENGINE) == ["exact: rheo m=1 with sampling parameters"]
    assert _only("fastpath: cycle", ENGINE) == ["fastpath: cycle law"]
    assert select_only(ENGINE, "decision") == (["fastpath: decision equality"], "substring")


def _gate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """``rheo gate --impl IMPL --profile smoke ARGS`` on one tiny case of the user's alone
    (``--cases-only``): exact certification in about 2 s."""
    (tmp_path / "cases").mkdir(exist_ok=True)
    case = hashed_case(3, 4, 1, policy="rheo", K=2, m=0, budget=2, temperature="1/2")
    (tmp_path / "cases" / "my-chain.json").write_text(json.dumps(case), encoding="utf-8")
    argv = ["gate", "--impl", IMPL, "--profile", "smoke", "--cases", str(tmp_path / "cases"), "--cases-only"]
    argv += [*args, "--json", "--out", str(tmp_path / "out")]
    return subprocess.run(
        [sys.executable, "-m", "rheo.cli", *argv], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


@pytest.mark.parametrize("text,how", [("exact", "alias"), (EXACT, "name")])
def test_gate_only_exact_runs_exact_certification_alone(tmp_path, text, how):
    r = _gate(tmp_path, "--only", text)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [c["name"] for c in out["checks"]] == [EXACT]
    assert out["only"] == {"text": text, "matched": [EXACT], "how": how}
    assert "names no check exactly" not in r.stderr


def test_gate_only_by_substring_says_what_it_matched(tmp_path):
    r = _gate(tmp_path, "--only", "certification")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [c["name"] for c in out["checks"]] == [EXACT]
    assert out["only"] == {"text": "certification", "matched": [EXACT], "how": "substring"}
    [note] = [line for line in r.stderr.splitlines() if "names no check exactly" in line]
    assert EXACT in note and "--only 'exact certification'" in note


def test_gate_only_matching_nothing_is_bad_input(tmp_path):
    r = _gate(tmp_path, "--only", "no-such-check")
    assert r.returncode == 2, r.stderr
    error = json.loads(r.stdout)["error"]
    assert "--only: no check name contains 'no-such-check'" in error and EXACT in error
