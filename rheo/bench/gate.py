"""``rheo bench gate``: what the supervised worker costs (docs/gate.md, "The supervised
worker").

Two figures, each measured side by side in one run:

1. **per call**: ``harness._watched`` around a call that does nothing, with the worker's
   own hook (``worker.call_hook`` writing to shared memory) against no hook. Rounds
   alternate (A B A B ...) and the medians are compared; the difference is what every call
   into an implementation pays. Target: under 1 ms (it is well under a microsecond).
2. **per run**: one implementation check (decision equality on the example
   implementation) run in the gate's own process and in a supervised worker. The
   difference is the worker's start (a spawned interpreter that imports the
   implementation) plus the per-call cost over every call.
"""

from __future__ import annotations

import multiprocessing
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rheo.checks import harness, worker
from rheo.checks.gate import impl_checks, run_checks
from rheo.checks.outcome import PROFILES
from rheo.reference import make_instance

EXAMPLE = "examples.loop_impl:LoopImplementation"
CHECK = "decision equality"
PER_CALL_TARGET_US = 1000.0  # the bound: under 1 ms per call


def _nothing() -> None:
    return None


def per_call(calls: int, rounds: int) -> dict:
    """Microseconds per watched call, with the worker's hook and without, alternating."""
    inst = make_instance(3, ["1/5", "1/2", "3/10"], ["1/2", "3/10", "1/5"], policy="rheo", K=3, m=1, depth=1, budget=2)
    hook = worker.call_hook(worker.shared_watch(multiprocessing.get_context("spawn")))
    watched = harness._watched

    def timed(h: Callable[[str, str, str], None] | None) -> float:
        harness.set_call_hook(h)
        try:
            t0 = time.perf_counter()
            for _ in range(calls):
                watched("verify", inst, _nothing)
            return (time.perf_counter() - t0) / calls * 1e6
        finally:
            harness.set_call_hook(None)

    bare, hooked = [], []
    for _ in range(rounds):
        bare.append(timed(None))
        hooked.append(timed(hook))
    b, h = statistics.median(bare), statistics.median(hooked)
    return {
        "calls_per_round": calls,
        "rounds": rounds,
        "bare_us": b,
        "with_hook_us": h,
        "overhead_us": h - b,
    }


def per_run(profile_name: str, rounds: int, progress: Callable[[str], object]) -> dict:
    """Seconds for one decision-equality check in this process and in a worker, alternating."""
    profile = PROFILES[profile_name]
    inside, outside = [], []
    with tempfile.TemporaryDirectory() as out:
        impl = harness.load_implementation(EXAMPLE)
        [check] = [c for c in impl_checks(impl) if CHECK in c.name]
        for r in range(rounds):
            progress(f"  round {r + 1}/{rounds}: in process ...")
            t0 = time.perf_counter()
            [res_in] = run_checks([check], profile, Path(out))
            inside.append(time.perf_counter() - t0)
            progress(f"  round {r + 1}/{rounds}: in a worker ...")
            t0 = time.perf_counter()
            run = worker.run_impl_checks(EXAMPLE, None, profile, CHECK, Path(out), worker.Limits())
            outside.append(time.perf_counter() - t0)
            [res_out] = run.results
            if (res_in.verdict, res_in.detail) != (res_out.verdict, res_out.detail):
                raise AssertionError(f"the worker changed the verdict: {res_in.detail!r} vs {res_out.detail!r}")
    i, o = statistics.median(inside), statistics.median(outside)
    return {
        "profile": profile_name,
        "check": f"impl: {CHECK} on {EXAMPLE}",
        "verdict": res_in.verdict,
        "in_process_seconds": i,
        "in_worker_seconds": o,
        "worker_overhead_seconds": o - i,
    }


def run_bench_gate(quick: bool = False, progress: Callable[[str], object] = print) -> dict:
    calls, rounds = (50_000, 3) if quick else (200_000, 5)
    progress(f"per call: {rounds} rounds of {calls} watched calls, with and without the worker's hook ...")
    call = per_call(calls, rounds)
    progress("per run: one decision-equality check in this process and in a worker ...")
    run = per_run("smoke" if quick else "quick", 1 if quick else 3, progress)
    return {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "per_call": call,
        "per_run": run,
        "worker_overhead_per_call_us": call["overhead_us"],
        "worker_overhead_per_call_target_us": PER_CALL_TARGET_US,
        "pass": call["overhead_us"] < PER_CALL_TARGET_US,
    }
