"""``rheo bench exact``: the class enumerator against the naive one, and how far it reaches.

All instances are generated (``rheo.reference.generate.hashed_instance``, seed 0): exact
tables that differ at every prefix, every weight in 1..20 (full support, so every
expansion draws from all non-lead tokens).

Its target (the class enumerator at least 20x the naive one on the comparison case) holds
on every device: the reference is pure Python (``rheo.bench.targets``). Every
certification longer than about 5 s reports progress (``rheo.progress``: the naive
enumerator's fraction of its joint draws, the class enumerator's share explored).

Specification: docs/spec.md §5 (what is certified).
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable

from rheo.bench.targets import EXACT, judge, passed, summary
from rheo.progress import PhaseMeters
from rheo.reference import Deadline, Timeout, certify
from rheo.reference.estimate import work_estimate
from rheo.reference.generate import hashed_instance

COMPARE = dict(n=6, policy="rheo", K=3, m=1, depth=3, budget=6, beam=3)
TARGETS = EXACT  # on CPU and CUDA: nothing here runs on a GPU
HEARTBEAT = 0.25  # seconds between a certification's heartbeats (progress lines: at most one a second)


def _watched(limit: float | None, progress, prefix: str = "") -> tuple[Deadline, PhaseMeters]:
    """A deadline whose phases report progress on ``progress`` (after 5 s, once a second)."""
    meters = PhaseMeters(progress, prefix=prefix)
    return Deadline(limit, every=HEARTBEAT, heartbeat=meters), meters


def _certify_within(n: int, limit: float, progress=None, **config):
    """Seconds to certify (cycle law + deviation) or None if over ``limit``."""
    inst = hashed_instance(n, 0, **config)
    deadline, meters = _watched(limit, progress, "  ")
    t0 = time.perf_counter()
    try:
        report = certify(inst, "classes", deadline, count_draws=False)
    except Timeout:
        return None, None
    meters.close()
    seconds = time.perf_counter() - t0
    if seconds > limit:
        return None, None
    return seconds, report


def compare(progress, case: dict = COMPARE) -> dict:
    cfg = dict(case)
    n = cfg.pop("n")
    progress(f"comparison: n={n} " + " ".join(f"{k}={v}" for k, v in cfg.items()) + " - class enumerator ...")
    t0 = time.perf_counter()
    fast = certify(hashed_instance(n, 0, **cfg), "classes")
    t_fast = time.perf_counter() - t0
    progress(f"  classes: {t_fast:.2f} s; naive enumerator (every joint draw; about half a minute) ...")
    inst = hashed_instance(n, 0, **cfg)
    deadline, meters = _watched(None, progress, "  ")
    deadline.expect("joint draws", work_estimate(inst, "naive").count)  # exactly: full support
    t0 = time.perf_counter()
    slow = certify(inst, "naive", deadline)
    t_slow = time.perf_counter() - t0
    meters.close()
    same = (
        fast.cycle.law == slow.cycle.law
        and fast.deviation.value == slow.deviation.value
        and fast.cycle.joint_draws == slow.cycle.joint_draws
        and fast.cycle.classes == slow.cycle.classes
    )
    return {
        "case": case,
        "naive_seconds": round(t_slow, 3),
        "classes_seconds": round(t_fast, 3),
        "speedup": round(t_slow / t_fast, 1),
        "target_speedup": 20,
        "same_answer": same,
        "joint_draws": slow.cycle.joint_draws,
        "classes": fast.cycle.classes,
        "lossless": fast.lossless and slow.lossless,
    }


def largest_vocab(limit: float, progress) -> dict:
    """Grow n by a power-law prediction of the time, then bisect between the last success
    and the first failure."""
    cfg = dict(policy="rheo", K=3, m=1, depth=3, budget=6)
    ok_n: int | None = None
    ok_t: float | None = None
    fail_n: int | None = None
    n = 4
    while True:
        progress(f"largest vocabulary: n={n} ...")
        t, report = _certify_within(n, limit, progress, **cfg)
        if t is not None:
            progress(f"  certified in {t:.1f} s ({report.cycle.classes} classes, lossless={report.lossless})")
            ok_n, ok_t = n, t
            grow = int(n * min(2.0, max(1.05, (0.85 * limit / max(t, 1e-3)) ** (1 / 3))))
            nxt = max(n + 1, grow)
        else:
            progress(f"  over {limit:g} s")
            fail_n = n
            nxt = (ok_n + n) // 2 if ok_n else max(2, n // 2)
        if fail_n is not None and nxt >= fail_n:
            nxt = ((ok_n or 0) + fail_n) // 2
        if ok_n is not None and (nxt <= ok_n or (fail_n is not None and fail_n - ok_n <= 1)):
            break
        n = nxt
    return {
        "config": {**cfg, "beam": 3},
        "largest_n": ok_n,
        "seconds": None if ok_t is None else round(ok_t, 2),
        "first_over_limit": fail_n,
    }


def largest_depth(limit: float, progress) -> dict:
    best: int | None = None
    best_t: float | None = None
    depth = 1
    while True:
        progress(f"largest depth: n=4 depth={depth} budget={2 * depth} ...")
        t, report = _certify_within(4, limit, progress, policy="rheo", K=3, m=1, depth=depth, budget=2 * depth)
        if t is None:
            progress(f"  over {limit:g} s")
            break
        progress(f"  certified in {t:.1f} s ({report.cycle.classes} classes, lossless={report.lossless})")
        best, best_t = depth, t
        depth += 1
    return {
        "config": {"n": 4, "policy": "rheo", "K": 3, "m": 1, "budget": "2*depth", "beam": 3},
        "largest_depth": best,
        "seconds": None if best_t is None else round(best_t, 2),
        "first_over_limit": depth,
    }


def run_bench_exact(
    limit: float = 60.0, skip_search: bool = False, progress: Callable[[str], None] = print, case: dict = COMPARE
) -> dict:
    """The benchmark as a dict (the CLI renders it): the side-by-side comparison and, unless
    ``skip_search``, the largest vocabulary and depth certified within ``limit`` seconds."""
    out: dict = {
        "benchmark": "exact",
        "limit_seconds": limit,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "processor": platform.machine()},
    }
    out["comparison"] = compare(progress, case)
    if not skip_search:
        out["largest_vocab"] = largest_vocab(limit, progress)
        out["largest_depth"] = largest_depth(limit, progress)
    c = out["comparison"]
    out["device"] = "cpu"  # the reference is pure Python
    verdicts = judge(c, out["device"], TARGETS)
    out.update(summary(verdicts))
    out["pass"] = c["same_answer"] and c["lossless"] and passed(verdicts)
    return out
