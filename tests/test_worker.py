"""The implementation runs in a supervised worker (rheo.checks.worker): whatever it does,
the gate reports a one-line finding naming the call and the case, exits 1 (or 2 when it
cannot even be loaded), and still writes its JSON and JUnit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

HOSTILE = """
import os, sys, time
from examples.loop_impl import LoopImplementation


class ExitsInVerify(LoopImplementation):
    def verify(self, *a):
        os._exit(0)


class SysExitInVerify(LoopImplementation):
    def verify(self, *a):
        sys.exit(0)


class Sleeps(LoopImplementation):
    def verify(self, *a):
        time.sleep(1000)


class Prints(LoopImplementation):
    def verify(self, *a):
        print("hello from verify \\x1b[31mred")
        return super().verify(*a)


class Segfaults(LoopImplementation):
    def verify(self, *a):
        import ctypes

        ctypes.string_at(0)


class HogsMemory(LoopImplementation):
    def verify(self, *a):
        return bytearray(16 * 2**30)  # 16 GiB: over the test's --memory-limit at once
"""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    (folder / "hostile.py").write_text(HOSTILE)
    (folder / "exits_at_import.py").write_text("import sys\nsys.exit(0)\n")
    return folder


def gate(folder: Path, impl: str, *flags: str, capsys=None, monkeypatch=None) -> tuple[int, str, str]:
    """rheo gate (in this process; the implementation in its worker) on one decision-equality
    check at smoke size (its verify is called at once): (exit status, stdout, stderr)."""
    from rheo.cli import main

    monkeypatch.chdir(folder)
    code = main(
        ["gate", "--impl", str(folder / impl), "--profile", "smoke", "--only", "decision"]
        + ["--out", str(folder / "out"), *flags]
    )
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    "impl, flags, needle",
    [
        ("hostile.py:ExitsInVerify", (), "implementation exited with status 0 during verify on case V="),
        ("hostile.py:SysExitInVerify", (), "implementation exited with status 0 during verify on case V="),
        ("hostile.py:Sleeps", ("--call-timeout", "1"), "did not return within 1 s during verify on case V="),
        ("hostile.py:Segfaults", (), "implementation was killed by signal 11 (SIGSEGV) during verify"),
    ],
    ids=["os._exit", "sys.exit", "hang", "segfault"],
)
def test_what_the_implementation_does_is_a_finding_and_the_reports_are_still_written(
    hostile, impl, flags, needle, capsys, monkeypatch
):
    junit = hostile / f"{impl.replace(':', '-')}.xml"
    code, stdout, stderr = gate(
        hostile, impl, "--json", "--junit", str(junit), *flags, capsys=capsys, monkeypatch=monkeypatch
    )
    assert code == 1, stdout + stderr
    out = json.loads(stdout)  # one JSON object, whatever the worker did
    [check] = out["checks"]
    assert check["verdict"] == "fail" and needle in check["detail"], check["detail"]
    assert "\n" not in check["detail"]
    assert ET.parse(junit).getroot().get("failures") == "1"


def test_prints_stay_out_of_json_and_out_of_the_terminal(hostile, capsys, monkeypatch):
    code, stdout, stderr = gate(hostile, "hostile.py:Prints", "--json", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, stdout + stderr
    assert json.loads(stdout)["passed"]
    assert "hello from verify" not in stdout and "\x1b" not in stdout + stderr


def test_memory_limit(hostile, capsys, monkeypatch):
    code, stdout, stderr = gate(
        hostile, "hostile.py:HogsMemory", "--json", "--memory-limit", "3000", capsys=capsys, monkeypatch=monkeypatch
    )
    assert code == 1, stdout + stderr
    [check] = json.loads(stdout)["checks"]
    assert "MemoryError" in check["detail"] or "killed" in check["detail"], check["detail"]


def test_an_exit_while_loading_is_bad_input(hostile, capsys, monkeypatch):
    code, stdout, stderr = gate(
        hostile, "exits_at_import.py:Anything", "--json", capsys=capsys, monkeypatch=monkeypatch
    )
    assert code == 2, stdout + stderr
    assert "exited with status 0 while it was being loaded" in json.loads(stdout)["error"]


@pytest.mark.parametrize(
    "flags, needle",
    [
        (("--impl", ""), "--impl: expected MODULE:OBJECT"),
        (("--impl", ":"), "--impl: expected MODULE:OBJECT"),
        (("--impl", "../x:Y"), "--impl: ../x is neither a dotted module name nor a .py file"),
        (("--impl", "examples.loop_impl:LoopImplementation", "--call-timeout", "-1"), "--call-timeout: must be"),
        (("--impl", "examples.loop_impl:LoopImplementation", "--timeout", "nan"), "--timeout: must be"),
        (("--impl", "examples.loop_impl:LoopImplementation", "--out", "README.md"), "--out: README.md is a file"),
        (("--junit", "no/such/folder/gate.xml"), "--junit: the folder no/such/folder does not exist"),
        (("--call-timeout", "5"), "--call-timeout: give the implementation too"),
        (
            ("--impl", "examples.loop_impl:LoopImplementation", "--replay", "x.json", "--only", "exact"),
            "--replay reruns one saved counterexample",
        ),
    ],
    ids=[
        "empty impl",
        "colon",
        "relative path",
        "negative call timeout",
        "nan timeout",
        "out is a file",
        "junit folder",
        "no impl",
        "replay with only",
    ],
)
def test_bad_flags_are_refused_before_any_check_runs(flags, needle, capsys, monkeypatch):
    from rheo.cli import main

    monkeypatch.chdir(ROOT)
    code = main(["gate", *flags])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
