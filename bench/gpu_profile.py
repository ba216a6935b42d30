"""Where a fastpath cycle's time goes on CUDA (bench/gpu_check.sh, step 2): torch.profiler over
one eager cycle and over ten CUDA-graph replays (rheo.fastpath.graph.CycleGraph) at batch 1,
V = 128256, PAPER_TREE, the bench's table model; prints each one's wall time and its top ops
and kernels by CUDA time. Needs a CUDA device.

    python bench/gpu_profile.py [--batch 1] [--rows 15]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

from rheo.bench.runner import TableRunner
from rheo.fastpath import PAPER_TREE
from rheo.fastpath.graph import CycleGraph


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rows", type=int, default=15, help="rows of each profile table")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench/gpu_profile.py needs a CUDA device")
    r = TableRunner(128256, args.batch, "cuda")
    u = r.uniforms(PAPER_TREE, seed=args.batch)
    r.cycle(PAPER_TREE, u)  # warm-up
    graph = CycleGraph(r.model.draft_logits, r.model.target_logits, PAPER_TREE, r.T, u, mode="graph")
    for name, fn, n in (
        ("eager cycle (default path)", lambda: r.cycle(PAPER_TREE, u), 1),
        ("CUDA-graph replays", lambda: graph(r.T, u), 10),
    ):
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            torch.cuda.synchronize()
            wall = (time.perf_counter() - t0) / n
        print(f"== {name}: {wall * 1e3:.2f} ms per cycle (forwards included), {n} run(s)")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
