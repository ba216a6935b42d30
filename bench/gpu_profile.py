"""Where a fastpath cycle's time goes on CUDA (bench/gpu_check.sh, step 2): torch.profiler over
one eager cycle and over ten CUDA-graph replays (rheo.fastpath.graph.CycleGraph) at batch 1,
V = 128256, PAPER_TREE, the bench's table model; prints each one's wall time and its top ops
and kernels by CUDA time. ``--device cpu`` (the script's CPU rehearsal, ``bash
bench/gpu_check.sh --cpu``) profiles the same on the CPU, CycleGraph in its CPU default mode
("eager", the static cycle), by CPU time.

    python bench/gpu_profile.py [--device cuda] [--batch 1] [--vocab 128256] [--rows 15]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

from rheo.bench.runner import TableRunner, sync_device
from rheo.fastpath import PAPER_TREE
from rheo.fastpath.graph import CycleGraph


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: the rehearsal (by CPU time)")
    ap.add_argument("--batch", type=int, default=1, help="requests per cycle (default 1)")
    ap.add_argument("--vocab", type=int, default=128256, help="vocabulary size V (default 128256)")
    ap.add_argument("--rows", type=int, default=15, help="rows of each profile table")
    args = ap.parse_args()
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("bench/gpu_profile.py: no CUDA device here (--device cpu profiles the CPU)")
    if args.batch < 1 or args.vocab < 2:  # the bench's own bounds (rheo bench fastpath --vocab >= 2)
        ap.error("--batch must be >= 1 and --vocab >= 2")  # exit 2, with the usage
    r = TableRunner(args.vocab, args.batch, args.device)
    u = r.uniforms(PAPER_TREE, seed=args.batch)
    r.cycle(PAPER_TREE, u)  # warm-up
    graph = CycleGraph(r.model.draft_logits, r.model.target_logits, PAPER_TREE, r.T, u)  # "graph" on CUDA
    replays = "CUDA-graph replays" if graph.captured else f"CycleGraph runs (mode {graph.mode})"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    for name, fn, n in (
        ("eager cycle (default path)", lambda: r.cycle(PAPER_TREE, u), 1),
        (replays, lambda: graph(r.T, u), 10),
    ):
        sync_device(args.device)
        with profile(activities=activities) as prof:
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            sync_device(args.device)
            wall = (time.perf_counter() - t0) / n
        print(f"== {name}: {wall * 1e3:.2f} ms per cycle (forwards included), {n} run(s) on {args.device}")
        key = "cuda_time_total" if cuda else "self_cpu_time_total"
        print(prof.key_averages().table(sort_by=key, row_limit=args.rows))


if __name__ == "__main__":
    main()
