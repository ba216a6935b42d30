"""The implementation runs in a supervised worker (rheo.checks.protocol.worker): whatever it does,
the gate reports a one-line finding naming the call and the case, exits 1 (or 2 when it
cannot even be loaded), and still writes its JSON and JUnit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

HOSTILE = """
from examples.loop_impl import LoopImplementation


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
        ("hostile.py:Segfaults", (), "implementation was killed by signal 11 (SIGSEGV) during verify"),
    ],  # exits and hangs: the rows of tests/test_hostile_input.py
    ids=["segfault"],
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


def test_memory_limit(hostile, capsys, monkeypatch):
    code, stdout, stderr = gate(
        hostile, "hostile.py:HogsMemory", "--json", "--memory-limit", "3000", capsys=capsys, monkeypatch=monkeypatch
    )
    assert code == 1, stdout + stderr
    [check] = json.loads(stdout)["checks"]
    assert "MemoryError" in check["detail"] or "killed" in check["detail"], check["detail"]


@pytest.mark.parametrize(
    "flags, needle",
    [
        (("--impl", "examples.loop_impl:LoopImplementation", "--call-timeout", "-1"), "--call-timeout: must be"),
        (("--call-timeout", "5"), "--call-timeout: give the implementation too"),
    ],
    ids=[
        "negative call timeout",
        "no impl",
    ],
)
def test_bad_flags_are_refused_before_any_check_runs(flags, needle, capsys, monkeypatch):
    from rheo.cli import main

    monkeypatch.chdir(ROOT)
    code = main(["gate", *flags])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_progress_from_inside_a_check_reaches_the_gate_through_the_worker(tmp_path, capsys, monkeypatch):
    """A check that runs longer than the quiet period in the worker reports its progress on
    the gate's stderr (fraction, rate, time left); before, the worker dropped it and the
    gate was silent. stdout stays one JSON object. The quiet period is 1 s here
    (RHEO_PROGRESS_AFTER, inherited by the worker), so each case's 6,000 cycles outlast it."""
    from rheo.cli import main

    monkeypatch.setenv("RHEO_PROGRESS_AFTER", "1")
    argv = ["gate", "--impl", "examples.loop_impl:LoopImplementation", "--only", "output law ("]
    code = main([*argv, "--profile", "smoke", "--cycles", "6000", "--out", str(tmp_path), "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out)["passed"]
    lines = [line for line in err.splitlines() if "cycles (" in line]
    assert lines and all(line.startswith("  output law, ") and "cycles/s" in line for line in lines), err
    assert any("left" in line for line in lines), err


def test_a_bad_progress_setting_is_refused_before_any_work(capsys, monkeypatch):
    from rheo.cli import main

    monkeypatch.setenv("RHEO_PROGRESS_AFTER", "-1")
    code = main(["exact", "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and json.loads(out)["error"].startswith("RHEO_PROGRESS_AFTER: expected seconds >= 0"), out
    assert len(err.strip().splitlines()) == 1, err
