"""``rheo bench gate --exact``: exact certification of an implementation
(``rheo.checks.exact.certify_implementation``), the first way of visiting its runs
(``method="replay"``) against the one-pass enumeration (``method="fast"``, the default),
side by side in one run, and the largest case the fast one certifies within a limit.

The cases are Rheo trees at depth 3 (``hashed_case(V, seed=0, depth=3, max_weight=9,
policy="rheo", m=1, beam=1)``, K and budget R per row): the reference builds the trees
(343 of them at V=8) and the verifier is ``examples.eagle_style:EagleVerifier``, EAGLE's
one-hot verifier drawing its own coins (``random.random``) and tokens
(``torch.multinomial``). The handed-uniform rows time ``examples.loop_impl:LoopImplementation``
(its own trees and verifier, every uniform bisected) the same two ways. Each row checks that
both ways found the same law, bit for bit. The speed target (``EXACT_SPEEDUP``, in
``rheo.bench.targets``) is judged on the largest side-by-side case.

Specification: docs/spec.md §5 (what is certified), §7 (the uniforms).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from rheo.checks.exact.certify import certify_implementation
from rheo.checks.protocol.load import load_implementation
from rheo.reference.generate import hashed_case

OWN_DRAWS = "examples.eagle_style:EagleVerifier"
HANDED = "examples.loop_impl:LoopImplementation"
Shape = tuple[int, int, int]  # (V, K, R) at depth 3
SIDE_BY_SIDE: tuple[Shape, ...] = ((5, 3, 6), (6, 3, 8), (8, 4, 10))
HANDED_SHAPES: tuple[Shape, ...] = ((5, 3, 6), (6, 3, 8))
LADDER: tuple[Shape, ...] = ((6, 3, 8), (8, 4, 10), (9, 4, 12), (10, 4, 12), (10, 5, 14), (12, 5, 14), (14, 6, 16))
DEPTH = 3
MAX_RUNS = 10**7  # the bench's own cap on runs per part (the gate's is MAX_RUNS of rheo.checks.exact)


def bench_case(V: int, K: int, R: int, depth: int = DEPTH) -> dict:
    """The bench's case of that shape: a Rheo tree, m=1, beam 1, seed 0."""
    case = hashed_case(V, 0, depth, max_weight=9, policy="rheo", K=K, m=1, budget=R, beam=1)
    return {"name": f"V={V} D={depth} K={K} R={R}", **case}


def _shape(V: int, K: int, R: int, depth: int) -> dict:
    return {"case": f"V={V} D={depth} K={K} R={R}", "V": V, "depth": depth, "K": K, "R": R, "beam": 1, "seed": 0}


def _timed(spec: str, case: dict, method: str, max_runs: int = MAX_RUNS):
    impl = load_implementation(spec)
    t0, c0 = time.perf_counter(), time.process_time()
    cert = certify_implementation(impl, case, max_runs=max_runs, method=method)
    return cert, time.perf_counter() - t0, time.process_time() - c0


def side_by_side(
    spec: str, shapes: Sequence[Shape], progress: Callable[[str], object], depth: int = DEPTH
) -> list[dict]:
    """One row per shape: runs and seconds of each method on the same case, the ratio of
    the seconds (replay / fast; wall clock, and ``cpu_ratio`` of this process's CPU time) and
    whether the two laws are the same."""
    rows = []
    for V, K, R in shapes:
        case = bench_case(V, K, R, depth)
        progress(f"exact certification, {spec} on {case['name']}: the replay path ...")
        old, t_old, c_old = _timed(spec, case, "replay")
        progress(f"exact certification, {spec} on {case['name']}: the fast path ...")
        new, t_new, c_new = _timed(spec, case, "fast")
        rows.append(
            {
                **_shape(V, K, R, depth),
                "implementation": spec,
                "verdict": new.verdict,
                "trees": new.trees,
                "replay_runs": old.runs,
                "replay_seconds": t_old,
                "fast_runs": new.runs,
                "fast_seconds": t_new,
                "ratio": t_old / t_new if t_new > 0 else None,
                "replay_cpu_seconds": c_old,  # this process's CPU time: steadier on a shared machine
                "fast_cpu_seconds": c_new,
                "cpu_ratio": c_old / c_new if c_new > 0 else None,
                "same_law": (old.verdict, old.law) == (new.verdict, new.law),
            }
        )
    return rows


def largest_within(
    spec: str,
    limit: float,
    progress: Callable[[str], object],
    ladder: Sequence[Shape] = LADDER,
    depth: int = DEPTH,
) -> dict:
    """The largest case of ``ladder`` (growing) the fast path certifies within ``limit``
    seconds. A rung is given a cap on its runs from the last rung's rate (1.3 times the runs
    ``limit`` allows at that rate), so a rung far over the limit stops early; the ladder
    stops at the first rung not finished within the limit."""
    tried, best, rate = [], None, None
    for V, K, R in ladder:
        case = bench_case(V, K, R, depth)
        cap = MAX_RUNS if rate is None else max(1, int(1.3 * rate * limit))
        progress(f"largest case in {limit:g} s: {case['name']} (the fast path, at most {cap:,} runs) ...")
        cert, seconds, cpu = _timed(spec, case, "fast", cap)
        done = cert.verdict in ("lossless", "not lossless") and seconds <= limit
        row = {**_shape(V, K, R, depth), "verdict": cert.verdict, "runs": cert.runs, "seconds": seconds}
        tried.append({**row, "cpu_seconds": cpu})
        if not done:
            break
        best, rate = tried[-1], cert.runs / seconds if seconds > 0 else None
    return {"implementation": spec, "limit_seconds": limit, "largest": best, "tried": tried}


def run_exact_rows(
    progress: Callable[[str], object],
    limit: float = 60.0,
    shapes: Sequence[Shape] = SIDE_BY_SIDE,
    handed_shapes: Sequence[Shape] = HANDED_SHAPES,
    ladder: Sequence[Shape] = LADDER,
    depth: int = DEPTH,
) -> dict:
    """Every row of ``rheo bench gate --exact``; ``exact_fast_over_replay`` is the ratio on
    the last (largest) side-by-side case, the one the target is judged on."""
    own = side_by_side(OWN_DRAWS, shapes, progress, depth)
    handed = side_by_side(HANDED, handed_shapes, progress, depth) if handed_shapes else []
    largest = largest_within(OWN_DRAWS, limit, progress, ladder, depth)
    return {
        "own_draws": own,
        "handed": handed,
        "largest_within_limit": largest,
        "exact_fast_over_replay": own[-1]["ratio"] if own else None,
        "same_law": all(r["same_law"] for r in own + handed),
    }
