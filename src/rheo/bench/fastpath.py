"""``rheo bench fastpath``: the fastpath's costs, each ratio measured side by side in one run.

Model forwards are excluded: logits come from ``HashTableModel`` (a row gather from a bank),
and the time spent answering forwards is measured and subtracted. Per batch size:

- ``rheo_over_topk``: a Rheo cycle (tree + verification) over a Top-K cycle, same shape;
- ``sparse_over_dense``: tree construction with ``draft_top_k`` = 128 over the same
  construction drawing Y from the whole vocabulary (``expand_dense``, the faster of a
  Gumbel-max and ``torch.multinomial``);
- ``fast_over_naive_verify``: the EAGLE-style verifier (``verify_naive``: a Python loop over
  requests and visited nodes, a vocabulary softmax at each) over the batched ``verify``,
  on the same tree, logits and uniforms (their outputs are checked equal).

Runs alternate between the variants being compared (A B A B ...) and report medians; a
cycle variant runs at least ``MIN_SECONDS`` in total (at least ``repeats``, at most 50 runs),
and the dense tree build too (at least ``repeats // 2``, at most 20 builds of each kind).

The cycle without the host in the loop (``rheo.bench.captured``, ``rheo.fastpath.graph``): on
CUDA a CUDA graph per batch size, and at the first and last batch sizes (the targets') also
compiled whole by ``torch.compile`` in CUDA graphs, the faster mode whose outputs equal the
eager cycle's setting the figures; on a CPU compiled whole at batch 1 (one thread); each
timed less its forwards run the same way. And ops per cycle at batch 1 (``op_counts``,
ATen ops and kernel launches) beside those of the code before (``OPS_BEFORE``).

On CUDA, where the eager builds and verifier are bound by kernel launches, the two tree
builds and the batched verifier are also timed as CUDA graphs (``captured_builds``,
``captured_verify``): ``sparse_over_dense_captured`` and ``fast_over_naive_verify_captured``.

Targets (``TARGETS``, judged by ``rheo.bench.targets`` on the device the run used):
``rheo_over_topk <= 1.25`` on CPU and CUDA; ``sparse_over_dense <= 0.25`` on a CPU and
``sparse_over_dense_captured <= 0.25`` on CUDA; ``fast_over_naive_verify >= 0.8`` on a
CPU, where both verifiers are bound by the same vocabulary-wide softmax, and
``fast_over_naive_verify_captured >= 10`` on CUDA, where the loop's every op is a launch;
``launches_compiled_over_before <= 0.1`` on a CPU (where the cycle is compiled and
counted); on CUDA the captured cycle in at most 1 ms at batch 1 and 3 ms at batch 64 and
``rheo_over_topk_captured <= 1.05`` (docs/fastpath.md). Every phase longer than about 5 s
reports progress (``rheo.progress``).

Specification: docs/spec.md §1-§4 (the algorithm timed), §7 (its uniforms).
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable
from typing import Any, Literal

import torch

from rheo.bench.captured import (
    attempt,
    captured_builds,
    captured_cycles,
    captured_figures,
    captured_verify,
    describe_captured,
    describe_captured_builds,
    error_text,
    fastest,
    findings,
)
from rheo.bench.ops import OpCounter, count_launches
from rheo.bench.runner import TableRunner, sync_device
from rheo.bench.targets import FASTPATH, judge, summary
from rheo.fastpath import PAPER_TREE, Params, build_tree, verify
from rheo.fastpath.expand_dense import expand_dense
from rheo.fastpath.verify_naive import verify_naive
from rheo.progress import Meter

MIN_SECONDS = 1.0  # each cycle variant runs at least this long in total (up to 50 runs)
TARGETS = FASTPATH


# The fastpath before issue 37 (commit 54c57f7), counted by ``bench/ops_before_after.py``, which
# exports that commit's code and counts it beside this checkout's in one run (V = 128256,
# PAPER_TREE, batch 1, float32, the bench's table model and seed, one warm-up cycle): ATen ops
# with forwards excluded (``OpCounter``), and kernel launches with the table model's forwards
# included (``count_launches``, what the compiled cycle is compared with). Op counts do not
# depend on the device; the data-dependent branches follow the seed, on which the outputs
# before and now (eager and compiled) are equal. Recorded 2026-12-05.
OPS_BEFORE: dict[str, dict[str, int]] = {
    "rheo": {"cycle": 2303, "cycle_kernels": 1673, "cycle_syncs": 94, "launches": 1842},
    "topk": {"cycle": 1782, "cycle_kernels": 1325, "cycle_syncs": 49, "launches": 1480},
}
BEFORE_COMMIT = "54c57f7"


def op_counts(
    vocab: int = 128256, batch: int = 1, params: Params = PAPER_TREE, device: str = "cpu", static: bool = False
) -> dict:
    """The ATen ops one cycle dispatches (``rheo.bench.ops.OpCounter``), model forwards
    excluded, for Rheo (``params``) and Top-K on the same shape, each after one uncounted
    warm-up cycle (constants made once per shape are not a cycle's cost): per policy
    ``build``, ``verify`` and ``cycle`` totals, the cycle's kernels (ops that are no views)
    and host syncs, its most frequent ops, and its kernel ``launches`` counted by the
    profiler with the forwards included (``count_launches``, comparable with a compiled
    cycle's). ``static``: the static-shape, sync-free cycle a CUDA graph captures
    (``build_tree(static=True)``, ``verify(static=True)``: all D+1 depths)."""
    out: dict[str, Any] = {"batch": batch, "static": static}
    for name, cfg in (("rheo", params), ("topk", params.replace(policy="topk"))):
        r = TableRunner(vocab, batch, device)
        u = r.uniforms(cfg, seed=batch)
        counters = []
        for _ in range(2):  # a warm-up, then the counted cycle
            r.model.context = r.context.clone()
            build_counter, verify_counter = OpCounter(), OpCounter()

            def draft(query, counter=build_counter, model=r.model):
                with counter.paused():
                    return model.draft_logits(query)

            with build_counter:
                tree = build_tree(draft, cfg, r.T, u, static=static)
            logits = r.model.target_logits(tree)
            with verify_counter:
                verify(tree, logits, r.T, cfg, u, static=static)
            counters = [build_counter, verify_counter]
        build, ver = (c.summary() for c in counters)
        both = counters[0].by_name + counters[1].by_name

        def cycle(cfg=cfg, r=r, u=u):
            r.model.context = r.context.clone()
            tree = build_tree(r.model.draft_logits, cfg, r.T, u, static=static)
            return verify(tree, r.model.target_logits(tree), r.T, cfg, u, static=static)

        out[name] = {
            "build": build["total"],
            "verify": ver["total"],
            "cycle": build["total"] + ver["total"],
            "cycle_kernels": build["kernels"] + ver["kernels"],
            "cycle_syncs": build["syncs"] + ver["syncs"],
            "cycle_top_ops": dict(both.most_common(8)),
            "launches": count_launches(cycle)["launches"],
        }
    return out


def render_op_counts(ops: dict) -> list[str]:
    """The op counts as lines of text: per policy, before, now (default and static eager,
    ``OpCounter``) and the kernel launches of the cycle before, now and compiled whole."""
    lines = [
        f"ops per cycle at batch {ops['batch']}: ATen ops, forwards excluded (kernels, host syncs); "
        "kernel launches, the table model's forwards included"
    ]
    for name in ("rheo", "topk"):
        for label, key in (("before", "before"), ("now", "after"), ("static", "after_static")):
            row = (ops.get(key) or {}).get(name)
            if row is None:
                continue
            lines.append(
                f"  {name:<5} {label:<7} {row['cycle']:>6} ops ({row['cycle_kernels']} kernels, "
                f"{row['cycle_syncs']} syncs); {row['launches']} launches"
            )
        compiled = (ops.get("compiled") or {}).get(name)
        if compiled is not None:
            n = compiled["launches"]
            lines.append(f"  {name:<5} compiled {'not counted' if n is None else f'{n:>5} launches'}")
    if ops.get("compiled_over_before") is not None:
        lines.append(f"  launches, compiled over before (worst policy): x{ops['compiled_over_before']:.3f}")
    return lines


def bench_fastpath(
    *,
    batches=(1, 16, 64),
    vocab: int = 128256,
    params: Params = PAPER_TREE,
    repeats: int = 5,
    naive_batch: int = 64,
    device: str = "cpu",
    progress: Callable[[str], None] | None = None,
    compiled: bool = True,
    graphs: bool | None = None,
) -> dict:
    """Time the fastpath, forwards excluded; returns the rows and ratios as a dict (the CLI
    renders it), judged against the targets for ``device`` (``TARGETS``; ``targets`` and
    ``meets_targets`` hold those for this device, ``target_verdicts`` every one), with
    ``capture_findings``: what went wrong without the host in the loop (``findings``).
    ``compiled``: time the cycle without the host in the loop; ``graphs``: time the tree
    builds and the batched verifier as CUDA graphs (default: on CUDA when ``compiled``;
    ``rheo.fastpath.graph.capture`` does the capturing, which a test stands in for on a
    CPU). ``params``
    is the Rheo configuration timed (Top-K on the same tree beside it); ``progress`` hears
    one line per batch size and a progress line every second of a phase longer than 5 s."""
    say = progress or (lambda msg: None)
    cfg = params
    K, depth, budget, m, draft_top_k = cfg.K, cfg.depth, cfg.budget, cfg.m, cfg.draft_top_k
    topk_cfg = cfg.replace(policy="topk")
    out: dict[str, Any] = {
        "device": str(device),
        "vocab": vocab,
        "K": K,
        "depth": depth,
        "budget": budget,
        "m": m,
        "draft_top_k": draft_top_k,
        "repeats": repeats,
        "torch_threads": torch.get_num_threads(),
        "forwards": "excluded (table model, time subtracted)",
    }
    say("counting ops per cycle (batch 1), eager and static")
    ops_now = op_counts(vocab, 1, cfg, device)
    ops_static = op_counts(vocab, 1, cfg, device, static=True)
    paper = (vocab, cfg) == (128256, PAPER_TREE)
    out["ops_per_cycle"] = ops = {
        "batch": 1,
        "counter": "TorchDispatchMode (rheo.bench.ops.OpCounter): ATen ops below autograd, views included",
        "launch_counter": "torch.profiler (rheo.bench.ops.count_launches): kernels, forwards included",
        "before_commit": BEFORE_COMMIT if paper else None,
        "before": OPS_BEFORE if paper else None,
        "after": {k: ops_now[k] for k in ("rheo", "topk")},
        "after_static": {k: ops_static[k] for k in ("rheo", "topk")},
        "compiled": None,
        "compiled_over_before": None,
    }
    captured: dict[str, Any] = {}
    cuda = torch.device(device).type == "cuda"
    graphs = cuda and compiled if graphs is None else graphs
    if compiled:
        for b in batches if cuda else batches[:1]:
            say(f"batch {b}: the cycle {'captured as a CUDA graph' if cuda else 'compiled whole (about a minute)'}")
            rows = [captured_cycles(vocab, b, cfg, device, repeats, count=(b == 1 and not cuda))]
            say(f"batch {b}: {describe_captured(rows[0])}")  # said now: a run stopped later keeps it
            if cuda and b in (batches[0], batches[-1]):  # 1 and 64 by default, the targets': compiling takes a while
                say(f"batch {b}: the cycle compiled whole, in CUDA graphs (torch.compile, reduce-overhead)")
                compile_run = functools.partial(
                    captured_cycles, vocab, b, cfg, device, repeats, count=False, mode="compile"
                )
                rows.append(attempt(compile_run, "compile", b))
                say(f"batch {b}: {describe_captured(rows[-1])}")
            captured[str(b)] = fastest(rows)
        if not cuda and "1" in captured:
            ops["compiled"] = {k: {"launches": captured["1"][k]["launches"]} for k in ("rheo", "topk")}
            if paper and all(captured["1"][k]["launches"] is not None for k in ("rheo", "topk")):
                ops["compiled_over_before"] = max(
                    captured["1"][k]["launches"] / OPS_BEFORE[k]["launches"] for k in ("rheo", "topk")
                )
    for line in render_op_counts(ops):
        say(line)
    out["captured"] = captured
    by_batch: dict[str, dict] = {}
    out["batches"] = by_batch
    for b in batches:
        r = TableRunner(vocab, b, device)
        u = r.uniforms(cfg, seed=b)
        r.cycle(cfg, u)  # warm-up
        first = r.cycle(topk_cfg, u)[0]
        runs = min(50, max(repeats, math.ceil(MIN_SECONDS / max(first, 1e-6))))  # small batches: more runs
        t_rheo, t_topk = [], []
        meter = Meter(f"batch {b}: Rheo and Top-K cycles, alternating", 2 * runs, progress, unit="cycles")
        for _ in range(runs):
            t_rheo.append(r.cycle(cfg, u)[0])
            t_topk.append(r.cycle(topk_cfg, u)[0])
            meter.advance(2)
        meter.close()
        # full-vocabulary baseline: pick the faster draw, then alternate with the sparse build
        dense: dict[str, float] = {}
        methods: tuple[Literal["gumbel", "multinomial"], ...] = ("gumbel", "multinomial")
        builds = max(1, repeats // 2)
        meter = Meter(f"batch {b}: tree builds, sparse and dense", len(methods) + 2 * builds, progress, unit="builds")
        for method in methods:
            fn = functools.partial(expand_dense, method=method)
            dense[method] = r.build(cfg, u, fn)[0]
            meter.advance()
        method = min(methods, key=lambda k: dense[k])
        fn = functools.partial(expand_dense, method=method)
        # small batches: more pairs, as for the cycles (one pair at batch 1 let one slow build decide)
        builds = min(20, max(builds, math.ceil(MIN_SECONDS / max(dense[method], 1e-6))))
        meter.total = len(methods) + 2 * builds
        t_sparse, t_dense = [], []
        for _ in range(builds):
            t_sparse.append(r.build(cfg, u)[0])
            t_dense.append(r.build(cfg, u, fn)[0])
            meter.advance(2)
        meter.close()
        row = {
            "rheo_cycle_s": statistics.median(t_rheo),
            "topk_cycle_s": statistics.median(t_topk),
            "sparse_build_s": statistics.median(t_sparse),
            "dense_build_s": statistics.median(t_dense),
            "dense_method": method,
            "cycle_runs": runs,
        }
        row["rheo_over_topk"] = row["rheo_cycle_s"] / row["topk_cycle_s"]
        row["sparse_over_dense"] = row["sparse_build_s"] / row["dense_build_s"]
        by_batch[str(b)] = row
        say(
            f"batch {b}: rheo {row['rheo_cycle_s'] * 1e3:.1f} ms, topk {row['topk_cycle_s'] * 1e3:.1f} ms "
            f"(x{row['rheo_over_topk']:.2f}); build sparse {row['sparse_build_s'] * 1e3:.1f} ms vs dense "
            f"{row['dense_build_s'] * 1e3:.1f} ms [{method}] (x{row['sparse_over_dense']:.3f})"
        )
        if graphs:  # the same builds as CUDA graphs: their own work, launches out of the way
            try:
                row.update(captured_builds(r, cfg, u, repeats))
                say(f"batch {b}: {describe_captured_builds(row)}")
            except Exception as e:  # reported; the run goes on
                row["captured_error"] = error_text(e)
                say(f"batch {b}: the tree builds as CUDA graphs failed, {row['captured_error']}")
    # the naive verifier, at one batch size, on one tree
    r = TableRunner(vocab, naive_batch, device)
    u = r.uniforms(cfg, seed=99)
    r.model.context = r.context.clone()
    tree = build_tree(r.model.draft_logits, cfg, r.T, u)
    logits = r.model.target_logits(tree)
    assert isinstance(logits, torch.Tensor)  # the table model is not lazy here
    t_fast, t_naive = [], []
    meter = Meter(f"verify at batch {naive_batch}: batched and naive loop", 2 + 2 * repeats, progress, unit="runs")
    verify(tree, logits, r.T, cfg, u), verify_naive(tree, logits, r.T, cfg, u)  # warm-up (workspace, caches)
    meter.advance(2)
    fast_res = verify(tree, logits, r.T, cfg, u)
    for _ in range(repeats):
        sync_device(device)
        t0 = time.perf_counter()
        fast_res = verify(tree, logits, r.T, cfg, u)
        sync_device(device)
        t_fast.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        verify_naive(tree, logits, r.T, cfg, u)
        sync_device(device)
        t_naive.append(time.perf_counter() - t0)
        meter.advance(2)
    meter.close()
    # equality is checked in float64 (float32 CDFs over 128k tokens round differently
    # when the two verifiers normalize at different steps)
    r64 = TableRunner(vocab, min(8, naive_batch), device, dtype=torch.float64)
    u64 = r64.uniforms(cfg, seed=98)
    tree64 = build_tree(r64.model.draft_logits, cfg, r64.T, u64)
    logits64 = r64.model.target_logits(tree64)
    assert isinstance(logits64, torch.Tensor)
    same = bool(
        torch.equal(
            verify(tree64, logits64, r64.T, cfg, u64).tokens.cpu(),
            verify_naive(tree64, logits64, r64.T, cfg, u64).tokens.cpu(),
        )
    )
    del logits64
    verify_row: dict[str, Any] = {
        "batch": naive_batch,
        "fast_s": statistics.median(t_fast),
        "naive_s": statistics.median(t_naive),
        "outputs_equal_float64": same,
        "mean_output_length": float(fast_res.lengths.float().mean()),
    }
    verify_row["fast_over_naive_verify"] = verify_row["naive_s"] / verify_row["fast_s"]
    out["verify"] = verify_row
    say(
        f"verify at batch {naive_batch}: batched {verify_row['fast_s'] * 1e3:.1f} ms, naive "
        f"{verify_row['naive_s'] * 1e3:.1f} ms (x{verify_row['fast_over_naive_verify']:.1f}), "
        f"outputs equal: {same}"
    )
    if graphs:  # the batched verifier as a CUDA graph against the same naive loop
        try:
            verify_row.update(captured_verify(tree, logits, r.T, cfg, u, fast_res, repeats))
            fast_captured = verify_row["fast_captured_s"]
            ok = fast_captured > 0 and verify_row["captured_outputs_equal"]  # a wrong verifier gets no ratio
            verify_row["fast_over_naive_verify_captured"] = verify_row["naive_s"] / fast_captured if ok else None
            say(
                f"verify at batch {naive_batch} as a CUDA graph: {fast_captured * 1e3:.2f} ms "
                f"(naive loop over it x{verify_row['fast_over_naive_verify_captured'] or 0:.1f}), "
                f"outputs equal to the default walk: {verify_row['captured_outputs_equal']}"
            )
        except Exception as e:  # reported; the run goes on
            verify_row["captured_error"] = error_text(e)
            say(f"verify at batch {naive_batch} as a CUDA graph failed, {verify_row['captured_error']}")
    rows = list(by_batch.values())
    out["rheo_over_topk"] = max(x["rheo_over_topk"] for x in rows)
    out["sparse_over_dense"] = max(x["sparse_over_dense"] for x in rows)
    out["fast_over_naive_verify"] = verify_row["fast_over_naive_verify"]
    out["launches_compiled_over_before"] = ops["compiled_over_before"]
    if graphs:  # None where not measured (and then a capture finding says why)
        measured = [x["sparse_over_dense_captured"] for x in rows if x.get("sparse_over_dense_captured") is not None]
        out["sparse_over_dense_captured"] = max(measured) if len(measured) == len(rows) else None
        out["fast_over_naive_verify_captured"] = verify_row.get("fast_over_naive_verify_captured")
    if captured:  # the cycle without the host in the loop, by batch (ms, forwards subtracted)
        out.update(captured_figures(captured))
    out["capture_findings"] = findings(out)
    out.update(summary(judge(out, device, TARGETS)))  # targets, meets_targets: for this device
    return out
