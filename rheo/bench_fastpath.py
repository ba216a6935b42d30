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
"""
from __future__ import annotations

import dataclasses
import functools
import math
import statistics
import sys
import time

import torch

from rheo.fastpath import FastConfig, Uniforms, build_tree, verify
from rheo.fastpath.expand_dense import expand_dense
from rheo.fastpath.verify_naive import verify_naive
from rheo.testing import HashTableModel

MIN_SECONDS = 1.0  # each cycle variant runs at least this long in total (up to 50 runs)
SCALE, DRAFT_NOISE = 6.0, 0.3  # target logits 6 x N(0, 1), draft = target + 0.3 x N(0, 1)
TARGETS = {"rheo_over_topk": ("<=", 1.25), "sparse_over_dense": ("<=", 0.25), "fast_over_naive_verify": (">=", 10.0)}


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _progress(msg: str, quiet: bool) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


class _Runner:
    """One batch size: a table model whose context is reset before every run, so every
    variant sees the same roots and the same uniforms."""

    def __init__(self, V, b, device, seed=0, dtype=torch.float32):
        self.model = HashTableModel(V, b, seed=seed, rows=8, scale=SCALE, draft_noise=DRAFT_NOISE, dtype=dtype,
                                    device=device)
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


def bench_fastpath(*, batches=(1, 16, 64), vocab: int = 128256, K: int = 10, depth: int = 8, budget: int = 60,
                   m: int = 1, draft_top_k: int = 128, repeats: int = 5, naive_batch: int = 64, device: str = "cpu",
                   quiet: bool = False) -> dict:
    cfg = FastConfig(K=K, depth=depth, budget=budget, m=m, draft_top_k=draft_top_k)
    topk_cfg = dataclasses.replace(cfg, policy="topk")
    out = {"device": str(device), "vocab": vocab, "K": K, "depth": depth, "budget": budget, "m": m,
           "draft_top_k": draft_top_k, "repeats": repeats, "torch_threads": torch.get_num_threads(),
           "forwards": "excluded (table model, time subtracted)", "batches": {}}
    for b in batches:
        r = _Runner(vocab, b, device)
        u = r.uniforms(cfg, seed=b)
        r.cycle(cfg, u)  # warm-up
        first = r.cycle(topk_cfg, u)[0]
        runs = min(50, max(repeats, math.ceil(MIN_SECONDS / max(first, 1e-6))))  # small batches: more runs
        t_rheo, t_topk = [], []
        for _ in range(runs):
            t_rheo.append(r.cycle(cfg, u)[0])
            t_topk.append(r.cycle(topk_cfg, u)[0])
        # full-vocabulary baseline: pick the faster draw, then alternate with the sparse build
        dense = {}
        for method in ("gumbel", "multinomial"):
            fn = functools.partial(expand_dense, method=method)
            dense[method] = r.build(cfg, u, fn)[0]
        method = min(dense, key=dense.get)
        fn = functools.partial(expand_dense, method=method)
        t_sparse, t_dense = [], []
        for _ in range(max(1, repeats // 2)):
            t_sparse.append(r.build(cfg, u)[0])
            t_dense.append(r.build(cfg, u, fn)[0])
        row = {
            "rheo_cycle_s": statistics.median(t_rheo), "topk_cycle_s": statistics.median(t_topk),
            "sparse_build_s": statistics.median(t_sparse), "dense_build_s": statistics.median(t_dense),
            "dense_method": method, "cycle_runs": runs,
        }
        row["rheo_over_topk"] = row["rheo_cycle_s"] / row["topk_cycle_s"]
        row["sparse_over_dense"] = row["sparse_build_s"] / row["dense_build_s"]
        out["batches"][str(b)] = row
        _progress(f"batch {b}: rheo {row['rheo_cycle_s'] * 1e3:.1f} ms, topk {row['topk_cycle_s'] * 1e3:.1f} ms "
                  f"(x{row['rheo_over_topk']:.2f}); build sparse {row['sparse_build_s'] * 1e3:.1f} ms vs dense "
                  f"{row['dense_build_s'] * 1e3:.1f} ms [{method}] (x{row['sparse_over_dense']:.3f})", quiet)
    # the naive verifier, at one batch size, on one tree
    r = _Runner(vocab, naive_batch, device)
    u = r.uniforms(cfg, seed=99)
    r.model.context = r.context.clone()
    tree = build_tree(r.model.draft_logits, cfg, r.T, u)
    logits = r.model.target_logits(tree)
    t_fast, t_naive = [], []
    verify(tree, logits, r.T, cfg, u), verify_naive(tree, logits, r.T, cfg, u)  # warm-up (workspace, caches)
    fast_res = None
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
    # equality is checked in float64 (float32 CDFs over 128k tokens round differently
    # when the two verifiers normalize at different steps)
    r64 = _Runner(vocab, min(8, naive_batch), device, dtype=torch.float64)
    u64 = r64.uniforms(cfg, seed=98)
    tree64 = build_tree(r64.model.draft_logits, cfg, r64.T, u64)
    logits64 = r64.model.target_logits(tree64)
    same = bool(torch.equal(verify(tree64, logits64, r64.T, cfg, u64).tokens.cpu(),
                            verify_naive(tree64, logits64, r64.T, cfg, u64).tokens.cpu()))
    del logits64
    verify_row = {"batch": naive_batch, "fast_s": statistics.median(t_fast), "naive_s": statistics.median(t_naive),
                  "outputs_equal_float64": same, "mean_output_length": float(fast_res.lengths.float().mean())}
    verify_row["fast_over_naive_verify"] = verify_row["naive_s"] / verify_row["fast_s"]
    out["verify"] = verify_row
    _progress(f"verify at batch {naive_batch}: batched {verify_row['fast_s'] * 1e3:.1f} ms, naive "
              f"{verify_row['naive_s'] * 1e3:.1f} ms (x{verify_row['fast_over_naive_verify']:.1f}), "
              f"outputs equal: {same}", quiet)
    rows = out["batches"].values()
    out["rheo_over_topk"] = max(x["rheo_over_topk"] for x in rows)
    out["sparse_over_dense"] = max(x["sparse_over_dense"] for x in rows)
    out["fast_over_naive_verify"] = verify_row["fast_over_naive_verify"]
    out["targets"] = {k: f"{op} {v}" for k, (op, v) in TARGETS.items()}
    out["meets_targets"] = {k: (out[k] <= v if op == "<=" else out[k] >= v) for k, (op, v) in TARGETS.items()}
    return out


def float32_deviation(*, vocab: int = 2000, batch: int = 256, cycles: int = 4, seed: int = 0, device="cpu") -> dict:
    """The float32 path against the float64 one on random instances, same uniforms: the
    share of requests whose tree / output agree, and the largest |difference| of a path
    score or a sample's residual probability where the trees agree."""
    cfg = FastConfig(K=6, depth=5, budget=24, m=1)
    agree_tree = agree_out = total = 0
    max_score = max_prob = 0.0
    for c in range(cycles):
        m64 = HashTableModel(vocab, batch, seed=seed + c, rows=64, dtype=torch.float64, device=device)
        m32 = HashTableModel(vocab, batch, seed=seed + c, rows=64, dtype=torch.float32, device=device)
        g = torch.Generator(device=device).manual_seed(seed + c)
        u = Uniforms.random(batch, cfg.K, cfg.B, cfg.depth, g, device=device)
        T = torch.rand(batch, generator=g, device=device, dtype=torch.float64) * 1.5
        trees, results = [], []
        for model in (m64, m32):
            tree = build_tree(model.draft_logits, cfg, T, u)
            trees.append(tree)
            results.append(verify(tree, model.target_logits(tree), T, cfg, u))
        same_tree = ((trees[0].tokens == trees[1].tokens) & (trees[0].parents == trees[1].parents)).all(1)
        same_out = (results[0].tokens == results[1].tokens).all(1)
        total += batch
        agree_tree += int(same_tree.sum())
        agree_out += int(same_out.sum())
        if bool(same_tree.any()):
            max_score = max(max_score, float((trees[0].scores - trees[1].scores)[same_tree].abs().max()))
            dp = (trees[0].sample_probs - trees[1].sample_probs.to(torch.float64))[same_tree].abs().max()
            max_prob = max(max_prob, float(dp))
    return {"requests": total, "tree_agreement": agree_tree / total, "output_agreement": agree_out / total,
            "max_abs_score_deviation": max_score, "max_abs_residual_prob_deviation": max_prob}


def render(out: dict) -> str:
    """The benchmark as a table."""
    lines = [f"rheo bench fastpath on {out['device']} ({out['torch_threads']} torch threads): V={out['vocab']}, "
             f"K={out['K']}, depth={out['depth']}, budget={out['budget']}, m={out['m']}, "
             f"draft_top_k={out['draft_top_k']}; forwards excluded; medians of alternating runs",
             f"{'batch':>6} {'rheo ms':>9} {'topk ms':>9} {'rheo/topk':>10} {'sparse ms':>10} {'dense ms':>10} "
             f"{'sparse/dense':>13}"]
    for b, r in out["batches"].items():
        lines.append(f"{b:>6} {r['rheo_cycle_s'] * 1e3:>9.1f} {r['topk_cycle_s'] * 1e3:>9.1f} "
                     f"{r['rheo_over_topk']:>10.3f} {r['sparse_build_s'] * 1e3:>10.1f} {r['dense_build_s'] * 1e3:>10.1f} "
                     f"{r['sparse_over_dense']:>13.3f}")
    v = out["verify"]
    lines.append(f"verify at batch {v['batch']}: batched {v['fast_s'] * 1e3:.1f} ms, naive loop {v['naive_s'] * 1e3:.1f} ms "
                 f"-> x{v['fast_over_naive_verify']:.2f} (mean |O| {v['mean_output_length']:.2f}; outputs equal "
                 f"in float64: {v['outputs_equal_float64']})")
    for k, target in out["targets"].items():
        mark = "met" if out["meets_targets"][k] else "MISSED"
        lines.append(f"  {k:<24} {out[k]:>8.3f}   target {target:<8} {mark}")
    return "\n".join(lines)
