# ruff: noqa: E501  (the table of rows reads best one row per line)
"""Hostile code and hostile input, one test per row of the table in issue 14 (docs/gate.md,
"The supervised worker", and docs/spec.md §8, "Limits").

Each row was once a traceback, a hang, a silent wrong answer or exit 0. Each now ends with
exit 2 and one error line (bad input), exit 1 and a one-line finding (the implementation
did something a lossless sampler does not), exit 3 at --timeout, or, where the input is
valid, the right answer. ``ROWS`` is the table: what the row is, the command, the exit
status and a piece of the one line it must print. The commands run in this process through
``rheo.cli.main`` (the gate's implementation in its own worker, as always), from a folder
holding the hostile files below.
"""

from __future__ import annotations

import json
import os
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rheo.casefile import MAX_ERRORS, load_case
from rheo.reference import CaseError

ROOT = Path(__file__).resolve().parents[1]

HOSTILE = """
import os, sys, time
from examples.loop_impl import LoopImplementation


class SysExit(LoopImplementation):
    def verify(self, *a):
        sys.exit(0)


class OsExit(LoopImplementation):
    def verify(self, *a):
        os._exit(0)


class FloatTokens(LoopImplementation):
    def verify(self, *a):
        res = super().verify(*a)
        return {**res, "tokens": [t + 0.4 for t in res["tokens"]]}


class StringTokens(LoopImplementation):
    def verify(self, *a):
        res = super().verify(*a)
        return {**res, "tokens": [str(t) for t in res["tokens"]]}


class Sleeps(LoopImplementation):
    def verify(self, *a):
        time.sleep(10**6)


class Prints(LoopImplementation):
    def verify(self, *a):
        print("hello from verify \\x1b[31mred")
        return super().verify(*a)


class NeedsGPU(LoopImplementation):
    def __init__(self):
        raise ValueError("needs a GPU")
"""

GOOD = {
    "vocab_size": 3,
    "target": {"*": ["1/5", "1/2", "3/10"]},
    "draft": {"*": ["1/2", "3/10", "1/5"]},
    "policy": "rheo",
    "K": 3,
    "m": 1,
    "depth": 1,
    "budget": 2,
}
COUNTEREXAMPLE = {  # the shape of a gate counterexample file (exact certification)
    "check": "exact certification",
    "implementation": "examples.buggy_impl:SkippedFilters",
    "verdict": "not lossless",
    "case": GOOD,
    "output_law": {"1 1": 0.25},
    "replay": "rheo gate --impl examples.buggy_impl:SkippedFilters --replay FILE",
}

FILES: dict[str, str | bytes] = {
    "hostile.py": HOSTILE,
    "exits_at_import.py": "import sys\nsys.exit(0)\n",
    "imports_missing.py": "import no_such_dependency_of_an_engine\n",
    "syntax_error.py": "def broken(:\n",
    "latin1.json": b'{"name": "caf\xe9"}',
    "nested.json": "[" * 200_000,
    "depth1000.json": json.dumps({**GOOD, "depth": 1000, "budget": 2}),
    "depth50.json": json.dumps({**GOOD, "depth": 50, "budget": 100}),
    "cold.json": json.dumps({**GOOD, "temperature": "1/1000000"}),
    "counterexample.json": json.dumps(COUNTEREXAMPLE),
    "digits.json": json.dumps({**GOOD, "target": {"*": ["1/5", "1/2", "3" + "1" * 4999 + "/1" + "0" * 4999]}}),
    "ansi.json": json.dumps({**GOOD, "description": "red \x1b[31mALERT\x00", "\x1b[2Jkey\x00": 1}),
    "a_file": "not a folder",
}


class Row(NamedTuple):
    what: str  # the row of the issue's table
    argv: tuple[str, ...]
    code: int
    line: str  # in the one error line (exit 2, 3) or the one-line finding (exit 1)


GATE = ("gate", "--profile", "smoke", "--only", "decision")
IMPL = "examples.loop_impl:LoopImplementation"

ROWS = [
    Row("module runs sys.exit(0) at import", (*GATE, "--impl", "exits_at_import.py:X"), 2, "exited with status 0 while it was being loaded"),
    Row("verify calls sys.exit(0)", (*GATE, "--impl", "hostile.py:SysExit"), 1, "implementation exited with status 0 during verify on case V="),
    Row("verify calls os._exit(0)", (*GATE, "--impl", "hostile.py:OsExit"), 1, "implementation exited with status 0 during verify on case V="),
    Row('--impl ""', ("gate", "--impl", ""), 2, "--impl: expected MODULE:OBJECT"),
    Row("without torch, --only fastpath", ("gate", "--only", "fastpath"), 1, "every check was skipped: nothing is proven"),
    Row("verify returns tokens as floats", (*GATE, "--impl", "hostile.py:FloatTokens"), 1, "tokens must hold integers; got float64 values"),
    Row("verify returns tokens as strings", (*GATE, "--impl", "hostile.py:StringTokens"), 1, "tokens must hold integers; got <U1 values"),
    Row("verify sleeps forever", (*GATE, "--impl", "hostile.py:Sleeps", "--call-timeout", "1"), 1, "did not return within 1 s during verify on case V="),
    Row("verify prints under --json", (*GATE, "--impl", "hostile.py:Prints"), 0, "same decisions as the reference"),
    Row("constructor error", (*GATE, "--impl", "hostile.py:NeedsGPU"), 2, "constructing NeedsGPU raised ValueError: needs a GPU"),
    Row("import error", (*GATE, "--impl", "imports_missing.py:X"), 2, "raised ModuleNotFoundError: No module named 'no_such_dependency_of_an_engine'"),
    Row("syntax error", (*GATE, "--impl", "syntax_error.py:X"), 2, "syntax_error.py:1: syntax error"),
    Row("--impl :", ("gate", "--impl", ":"), 2, "--impl: expected MODULE:OBJECT"),
    Row("--impl ../x:Y", ("gate", "--impl", "../x:Y"), 2, "--impl: ../x is neither a dotted module name nor a .py file"),
    Row("--out is a file", ("gate", "--impl", IMPL, "--out", "a_file"), 2, "--out: a_file is a file"),
    Row("--junit in a missing folder", ("gate", "--junit", "no/such/gate.xml"), 2, "--junit: the folder no/such does not exist"),
    Row("rheo exact on a link to /dev/zero", ("exact", "zero.json"), 2, "is larger than 64 MiB, the limit for a case file"),
    Row("rheo exact on a non-UTF-8 file", ("exact", "latin1.json"), 2, "is not UTF-8 text (at byte offset 13, counting from 0)"),
    Row("rheo exact on [ nested 200,000 deep", ("exact", "nested.json"), 2, "nests JSON arrays and objects more than 64 deep"),
    Row("rheo exact at depth 1000", ("exact", "depth1000.json", "--count-timeout", "0", "--timeout", "60"), 0, "verdict: LOSSLESS"),
    Row("rheo exact at depth 50, budget 100", ("exact", "depth50.json", "--timeout", "2"), 3, "--timeout: gave up after 2 s"),
    Row("rheo exact --timeout 2 on V = 2,000,000", ("exact", "huge.json", "--timeout", "2"), 3, "--timeout: gave up after 2 s"),
    Row("rheo exact at temperature 1/1000000", ("exact", "cold.json"), 2, "temperature: exact arithmetic takes T = 1/k for k <= 1000"),
    Row("--timeout -1", ("exact", "--timeout", "-1"), 2, "--timeout: must be a number of seconds > 0"),
    Row("--timeout nan", ("exact", "--timeout", "nan"), 2, "--timeout: must be a number of seconds > 0"),
    Row("--count-timeout -5", ("exact", "--count-timeout", "-5"), 2, "--count-timeout: must be a number of seconds > 0"),
    Row("gate --timeout nan", ("gate", "--impl", IMPL, "--timeout", "nan"), 2, "--timeout: must be"),
    Row("a case file with --list-examples", ("exact", "--list-examples", "ansi.json"), 2, "--list-examples: lists the built-in examples and reads nothing else; drop CASE.json"),
    Row("--replay with --profile", ("gate", "--impl", IMPL, "--replay", "counterexample.json", "--profile", "deep"), 2, "--replay reruns one saved counterexample"),
    Row("--replay with --only", ("gate", "--impl", IMPL, "--replay", "counterexample.json", "--only", "exact"), 2, "--replay reruns one saved counterexample"),
    Row("--replay with --junit", ("gate", "--impl", IMPL, "--replay", "counterexample.json", "--junit", "g.xml"), 2, "--replay reruns one saved counterexample"),
    Row("rheo exact on a gate counterexample file", ("exact", "counterexample.json"), 0, "verdict: LOSSLESS"),
    Row("a 5,000-digit rational", ("exact", "digits.json"), 2, "has a number with 5000 digits (311111111111...)"),
    Row("ANSI escapes and NUL in a key", ("exact", "ansi.json"), 2, "\\x1b[2Jkey\\x00: unknown key"),
]  # fmt: skip


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    here = tmp_path_factory.mktemp("hostile")
    for name, text in FILES.items():
        (here / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    (here / "zero.json").symlink_to("/dev/zero")
    n = 2_000_000  # two million tokens, three of them with mass
    target, draft = ["1/2", "1/4", "1/4"] + [0] * (n - 3), ["1/3", "1/3", "1/3"] + [0] * (n - 3)
    huge = {**GOOD, "vocab_size": n, "target": {"*": target}, "draft": {"*": draft}, "depth": 2, "budget": 4}
    (here / "huge.json").write_text(json.dumps(huge))
    return here


TOO_BIG = "rheo exact: this case needs "  # rheo exact's early line when a case cannot fit in --timeout


def run(folder: Path, argv, capsys, monkeypatch) -> tuple[int, str, str]:
    from rheo.cli import main

    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(ROOT))  # the hostile implementations import examples.loop_impl
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("row", ROWS, ids=[r.what for r in ROWS])
def test_each_row_of_the_table_ends_with_its_exit_status_and_one_line(row, folder, capsys, monkeypatch, tmp_path):
    if row.what.startswith("without torch"):
        monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    argv = row.argv
    gate_run = argv[0] == "gate" and "--impl" in argv and row.code != 2
    if gate_run:  # a finding still writes JSON and JUnit
        argv = (*argv, "--json", "--junit", str(tmp_path / "gate.xml"), "--out", str(tmp_path / "out"))
    t0 = time.perf_counter()
    code, out, err = run(folder, argv, capsys, monkeypatch)
    took = time.perf_counter() - t0
    assert code == row.code, (out, err)
    assert "Traceback" not in out + err and "\x1b" not in out + err and "\x00" not in out + err
    if code == 3:  # the deadline holds: at most 2 s past --timeout (docs/spec.md §8)
        assert took < float(argv[argv.index("--timeout") + 1]) + 2, took
    assert took < 60, took
    if code in (2, 3):
        lines = err.strip().splitlines()
        if code == 3:  # before it: the line that said at once that the case is too big, if it did
            lines = [line for line in lines if not line.startswith(TOO_BIG)]
        assert len(lines) == 1 and lines[0].startswith("rheo: error: ") and row.line in lines[0], err
        assert out == ""
    elif gate_run:
        report = json.loads(out)  # one JSON object, whatever the implementation did or printed
        [check] = report["checks"]
        assert row.line in check["detail"] and "\n" not in check["detail"], check["detail"]
        assert report["passed"] is (code == 0)
        junit = ET.parse(tmp_path / "gate.xml").getroot()
        assert junit.get("failures") == ("1" if code else "0")
        assert "hello from verify" not in out
    else:
        assert row.line in out + err, out + err


def test_the_table_has_every_row_of_the_issue():
    """34 rows: the 19 of the issue, with its "or" cases on rows of their own."""
    assert len(ROWS) == 34 and len({r.what for r in ROWS}) == len(ROWS)


def test_a_python_dict_with_an_integer_table_key_is_a_case_error():
    with pytest.raises(CaseError) as err:
        load_case({**GOOD, "target": {0: ["1/5", "1/2", "3/10"]}})
    assert err.value.field == "target" and "0" in err.value.message


def test_a_control_description_is_escaped_in_the_report(folder, capsys, monkeypatch):
    (folder / "described.json").write_text(json.dumps({**GOOD, "description": "red \x1b[31mALERT\x00"}))
    code, out, _ = run(folder, ("exact", "described.json"), capsys, monkeypatch)
    assert code == 0 and out.splitlines()[0] == "case: described.json - red \\x1b[31mALERT\\x00"


# The case loader, fuzzed: whatever the file holds, `rheo exact` ends with exit 0, 1, 2 or
# 3 and never a traceback, within its --timeout and a margin.

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=30,
)
CASE_KEYS = sorted(GOOD) + ["temperature", "draft_top_k", "arithmetic", "proxy", "beam", "target_top_p"]
NEAR_CASES = st.fixed_dictionaries(
    {}, optional={k: JSON_VALUES | st.just(GOOD.get(k, 1)) for k in CASE_KEYS}
)  # mostly a case's keys, with good or arbitrary values


def exact_on(folder: Path, data: bytes, capsys, monkeypatch) -> None:
    path = folder / "fuzz.json"
    path.write_bytes(data)
    t0 = time.perf_counter()
    code, out, err = run(folder, ("exact", str(path), "--timeout", "5", "--count-timeout", "1"), capsys, monkeypatch)
    assert code in (0, 1, 2, 3), (code, err)
    assert time.perf_counter() - t0 < 5 + 2
    if code in (2, 3):  # one line per error, each an error line (a case file's: at most MAX_ERRORS)
        lines = [line for line in err.strip().splitlines() if code == 2 or not line.startswith(TOO_BIG)]
        assert 1 <= len(lines) <= (MAX_ERRORS if code == 2 else 1), err
        assert all(line.startswith("rheo: error: ") for line in lines), err


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(value=JSON_VALUES | NEAR_CASES)
def test_arbitrary_json_is_read_or_refused_in_one_line(value, folder, capsys, monkeypatch):
    exact_on(folder, json.dumps(value).encode(), capsys, monkeypatch)


@FUZZ
@given(data=st.binary(max_size=200) | st.text(max_size=200).map(lambda s: s.encode("utf-8", "surrogatepass")))
def test_arbitrary_bytes_are_read_or_refused_in_one_line(data, folder, capsys, monkeypatch):
    exact_on(folder, data, capsys, monkeypatch)


def test_the_fuzzed_loader_can_fail(folder, capsys, monkeypatch):
    """The fuzz's assertion sees a traceback: a loader that raises something else than
    CaseError propagates out of main, so the fuzz would report it."""
    import rheo.cli.exact as exact

    def broken(*_):
        raise KeyError("vocab_size")

    monkeypatch.setattr(exact, "load_case", broken)
    with pytest.raises(KeyError):
        exact_on(folder, json.dumps(GOOD).encode(), capsys, monkeypatch)


if os.name != "posix":  # the /dev/zero row and the worker's signals are POSIX
    pytestmark = pytest.mark.skip(reason="POSIX only")
