"""The implementation's worker runs torch on one thread by default (``rheo gate --threads``):
a statistical check's cycles are many calls on tiny tensors, where a thread pool costs a
wake-up per op (and on a loaded machine, a wait for a core). ``rheo bench gate`` measures the
gate's cycle rate against a plain loop (its "adapter speed" rows)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rheo.bench.targets import GATE, judge, passed

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str, **env: str) -> str:
    import os

    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**clean, **env}, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_limit_threads_sets_the_variables_and_torch_and_keeps_what_the_user_set():
    pytest.importorskip("torch")
    code = (
        "import os, torch; from rheo.checks.protocol.worker import limit_threads; limit_threads({n}); "
        "print(os.environ.get('OMP_NUM_THREADS'), torch.get_num_threads())"
    )
    assert _python(code.format(n=1)) == "1 1"
    assert _python(code.format(n=1), OMP_NUM_THREADS="2").startswith("2 ")  # the user's variable is kept
    none = _python(code.format(n=None)).split()
    assert none[0] == "None"  # --threads 0: nothing set


def test_threads_flag_is_checked_and_needs_the_implementation():
    def gate(*args):
        return subprocess.run(
            [sys.executable, "-m", "rheo.cli", "gate", *args], capture_output=True, text=True, cwd=ROOT
        )

    r = gate("--impl", "examples.loop_impl:LoopImplementation", "--threads", "-1")
    assert r.returncode == 2 and "--threads: must be 0" in r.stderr, r.stderr
    r = gate("--threads", "2")
    assert r.returncode == 2 and "--threads: give the implementation too" in r.stderr, r.stderr


def test_bench_gate_adapter_speed_rows(monkeypatch):
    pytest.importorskip("torch")
    from rheo.bench.gate import adapter_speed

    out = adapter_speed(True, lambda _: None, cycles=200)
    for key in ("plain", "gate"):
        for threads in ("one_thread", "torch_default_threads"):
            assert out[f"{key}_cycles_per_second_{threads}"] > 0
    assert (
        out["plain_over_gate"] == out["plain_cycles_per_second_one_thread"] / out["gate_cycles_per_second_one_thread"]
    )
    assert json.dumps(out)  # JSON as --json writes it
    assert not passed(judge({"plain_over_gate": 2.5}, "cpu", GATE)) and passed(
        judge({"plain_over_gate": 1.5}, "cpu", GATE)
    )
