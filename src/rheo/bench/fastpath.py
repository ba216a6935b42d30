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
cycle variant runs at least ``MIN_SECONDS`` in total (at least ``repeats``, at most 50 runs).

Targets (``TARGETS``, judged by ``rheo.bench.targets`` on the device the run used):
``rheo_over_topk <= 1.25`` and ``sparse_over_dense <= 0.25`` on CPU and CUDA;
``fast_over_naive_verify >= 10`` on CUDA, where the loop's every op is a kernel launch,
and ``>= 0.8`` on a CPU, where both verifiers are bound by the same vocabulary-wide softmax
(docs/fastpath.md). Every phase longer than about 5 s reports progress (``rheo.progress``).

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

from rheo.bench.ops import OpCounter
from rheo.bench.targets import FASTPATH, judge, summary
from rheo.fastpath import PAPER_TREE, Params, Uniforms, build_tree, verify
from rheo.fastpath.expand_dense import expand_dense
from rheo.fastpath.verify_naive import verify_naive
from rheo.progress import Meter
from rheo.testing import HashTableModel

MIN_SECONDS = 1.0  # each cycle variant runs at least this long in total (up to 50 runs)
SCALE, DRAFT_NOISE = 6.0, 0.3  # target logits 6 x N(0, 1), draft = target + 0.3 x N(0, 1)
TARGETS = FASTPATH


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


class _Runner:
    """One batch size: a table model whose context is reset before every run, so every
    variant sees the same roots and the same uniforms."""

    def __init__(self, V, b, device, seed=0, dtype=torch.float32):
        self.model = HashTableModel(
            V, b, seed=seed, rows=8, scale=SCALE, draft_noise=DRAFT_NOISE, dtype=dtype, device=device
        )
        self.context = self.model.context.clone()
        self.T = torch.ones(b, dtype=torch.float64, device=device)
        self.device = device
        self.b = b

    def uniforms(self, cfg, seed):
        g = torch.Generator(device=self.device).manual_seed(seed)
        return Uniforms.random(self.b, cfg.K, cfg.B, cfg.depth, g, device=self.device)

    def _timed(self, fn):
        self.model.context = self.context.clone()
        self.model.forward_seconds = 0.0
        _sync(self.device)
        t0 = time.perf_counter()
        out = fn()
        _sync(self.device)
        return time.perf_counter() - t0 - self.model.forward_seconds, out

    def cycle(self, cfg, u):
        def run():
            tree = build_tree(self.model.draft_logits, cfg, self.T, u)
            return verify(tree, self.model.target_logits(tree), self.T, cfg, u)

        return self._timed(run)

    def build(self, cfg, u, expand_fn=None):
        return self._timed(lambda: build_tree(self.model.draft_logits, cfg, self.T, u, expand_fn=expand_fn))


# Ops per cycle before issue 37 (fewer, larger ops): the fastpath at commit 56497c7 (unchanged
# since 4d39e5c), exported with ``git archive HEAD fastpath`` and counted as ``op_counts``
# counts (V = 128256, PAPER_TREE, batch 1, float32, the bench's table model and uniforms,
# forwards excluded, after one warm-up cycle). Op counts do not depend on the device; the
# data-dependent branches (ties, the walk's early stop) follow the bench's seed, on which the
# outputs before and after are equal. Measured once, on 2026-12-05, on this project's CPU.
OPS_BEFORE: dict[str, dict[str, int]] = {
    "rheo": {"build": 1517, "verify": 785, "cycle": 2302, "cycle_kernels": 1672, "cycle_syncs": 94},
    "topk": {"build": 1171, "verify": 610, "cycle": 1781, "cycle_kernels": 1324, "cycle_syncs": 49},
}


def op_counts(
    vocab: int = 128256, batch: int = 1, params: Params = PAPER_TREE, device: str = "cpu", static: bool = False
) -> dict:
    """The ATen ops one cycle dispatches (``rheo.bench.ops.OpCounter``), model forwards
    excluded, for Rheo (``params``) and Top-K on the same shape, each after one uncounted
    warm-up cycle (constants made once per shape are not a cycle's cost): per policy
    ``build``, ``verify`` and ``cycle`` totals, the cycle's kernels (ops that are no views)
    and host syncs, and its most frequent ops. ``static``: the static-shape, sync-free cycle
    a CUDA graph captures (``build_tree(static=True)``, ``verify(static=True)``: all D+1
    depths)."""
    out: dict[str, Any] = {"batch": batch, "static": static}
    for name, cfg in (("rheo", params), ("topk", params.replace(policy="topk"))):
        r = _Runner(vocab, batch, device)
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
        out[name] = {
            "build": build["total"],
            "verify": ver["total"],
            "cycle": build["total"] + ver["total"],
            "cycle_kernels": build["kernels"] + ver["kernels"],
            "cycle_syncs": build["syncs"] + ver["syncs"],
            "cycle_top_ops": dict(both.most_common(8)),
        }
    return out


def render_op_counts(ops: dict) -> list[str]:
    """The op counts as lines of text: per policy, build / verify / cycle, before and after
    (and the static-shape cycle a CUDA graph captures)."""
    lines = [f"ops per cycle at batch {ops['batch']} (build / verify / cycle; kernels, host syncs)"]
    for name in ("rheo", "topk"):
        for label, key in (("before", "before"), ("after", "after"), ("static (graph)", "after_static")):
            row = (ops.get(key) or {}).get(name)
            if row is None:
                continue
            lines.append(
                f"  {name:<5} {label:<14} {row['build']:>6} / {row['verify']:>6} / {row['cycle']:>6}"
                f"   ({row['cycle_kernels']} kernels, {row['cycle_syncs']} syncs)"
            )
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
) -> dict:
    """Time the fastpath, forwards excluded; returns the rows and ratios as a dict (the CLI
    renders it), judged against the targets for ``device`` (``TARGETS``; ``targets`` and
    ``meets_targets`` hold those for this device, ``target_verdicts`` every one). ``params``
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
    ops_now = op_counts(vocab, 1, cfg, device)
    ops_static = op_counts(vocab, 1, cfg, device, static=True)
    out["ops_per_cycle"] = ops = {
        "batch": 1,
        "counter": "TorchDispatchMode (rheo.bench.ops.OpCounter): ATen ops below autograd, views included",
        "before": OPS_BEFORE if (vocab, cfg) == (128256, PAPER_TREE) else None,
        "after": {k: ops_now[k] for k in ("rheo", "topk")},
        "after_static": {k: ops_static[k] for k in ("rheo", "topk")},
    }
    for line in render_op_counts(ops):
        say(line)
    by_batch: dict[str, dict] = {}
    out["batches"] = by_batch
    for b in batches:
        r = _Runner(vocab, b, device)
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
    # the naive verifier, at one batch size, on one tree
    r = _Runner(vocab, naive_batch, device)
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
        _sync(device)
        t0 = time.perf_counter()
        fast_res = verify(tree, logits, r.T, cfg, u)
        _sync(device)
        t_fast.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        verify_naive(tree, logits, r.T, cfg, u)
        _sync(device)
        t_naive.append(time.perf_counter() - t0)
        meter.advance(2)
    meter.close()
    # equality is checked in float64 (float32 CDFs over 128k tokens round differently
    # when the two verifiers normalize at different steps)
    r64 = _Runner(vocab, min(8, naive_batch), device, dtype=torch.float64)
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
    verify_row = {
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
    rows = list(by_batch.values())
    out["rheo_over_topk"] = max(x["rheo_over_topk"] for x in rows)
    out["sparse_over_dense"] = max(x["sparse_over_dense"] for x in rows)
    out["fast_over_naive_verify"] = verify_row["fast_over_naive_verify"]
    out.update(summary(judge(out, device, TARGETS)))  # targets, meets_targets: for this device
    return out
