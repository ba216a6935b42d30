"""Losslessness on the real model: speculative decoding must sample from the target's law.

(a) ``first_tokens_check``: the first emitted token against the target's exact law after
    the prompt (one forward), and the second against the exact law given the first, for
    the most frequent first tokens; one-sample chi-square tests (``rheo.checks.statistics.goodness_of_fit.gof``).
    Samples come from ``PathTableLM``: many requests at the same prompt, the laws computed
    from the real target and head by plain causal forwards (no KV cache, no tree mask)
    and memoized by token path, so tens of thousands of cycles fit in minutes.
(b) ``later_token_check``: the k-th generated token (default the 12th, several cycles in)
    under speculative decoding with ``SpecLM`` end to end (KV cache, tree forwards, cache
    rollback across cycles) vs plain autoregressive sampling, a two-sample chi-square
    test of homogeneity.

Every test states its alpha (the check's total false-positive rate is split over its
tests, Bonferroni) and the total-variation distance it detects with power 0.99.

Specification: docs/spec.md §0 (p_T), §5 (losslessness).
"""

from __future__ import annotations

import collections
import copy
import time

import numpy as np
import torch
from scipy import stats as sstats

from rheo.checks.statistics.goodness_of_fit import detectable_tv, gof, merge_bins
from rheo.fastpath import DraftQuery, DraftTree, Params, VerifyResult, run_cycle
from rheo.integrations.eagle import causal_mask
from rheo.integrations.spec_lm import SpecLM


class PathTableLM:
    """``SpecModel`` for ``batch`` requests that all start at ``prompt``: every law is a
    pure function of (committed tokens, tree prefix), computed from the real models by
    plain causal forwards (after a prefill of the prompt minus its last token, copied per
    forward; no tree mask, no rollback) and memoized. The draft law follows the head as
    ``SpecLM`` runs it: true target features for the prompt and the committed tokens, the
    head's own predicted features along the tree prefix."""

    def __init__(self, target, head, prompt: list[int], batch: int):
        from transformers import DynamicCache

        self.target, self.head, self.prompt = target, head, list(prompt)
        self.batch, self.vocab_size = batch, target.config.vocab_size
        self.device = next(target.parameters()).device
        self.committed: list[tuple[int, ...]] = [() for _ in range(batch)]
        self._prefill = DynamicCache()
        with torch.no_grad():
            self._prompt_feats = self.target.model(
                input_ids=torch.tensor([prompt[:-1]]), cache=self._prefill, use_cache=True
            ).last_hidden_state[0]
        self._target: dict = {}  # absolute path after the prompt -> target logits [V]
        self._feats: dict = {}  # committed path -> target features of prompt + path [P + len, H]
        self._draft: dict = {}  # (committed, prefix) -> draft logits [V]
        self._h: dict = {}  # (committed, prefix) -> the head's predicted feature there [H]
        self.misses: collections.Counter[str] = collections.Counter()

    def reset(self) -> None:
        self.committed = [() for _ in range(self.batch)]

    # ---- exact laws by causal forwards ----
    def _after_prompt(self, paths: list[tuple]) -> torch.Tensor:
        """Target features at the root and along each path: [n, 1 + max len, H]."""
        n, L = len(paths), 1 + max(len(p) for p in paths)
        ids = torch.zeros((n, L), dtype=torch.int64)
        for i, p in enumerate(paths):
            ids[i, : len(p) + 1] = torch.tensor([self.prompt[-1], *p])  # right padding: never attended
        cache = copy.deepcopy(self._prefill)
        cache.batch_repeat_interleave(n)
        pos = torch.arange(len(self.prompt) - 1, len(self.prompt) - 1 + L).unsqueeze(0).expand(n, L)
        with torch.no_grad():
            return self.target.model(input_ids=ids, position_ids=pos, cache=cache, use_cache=True).last_hidden_state

    def _target_paths(self, paths: list[tuple]) -> None:
        need = sorted({p for p in paths if p not in self._target})
        for k in range(0, len(need), 64):
            part = need[k : k + 64]
            self.misses["target"] += len(part)
            with torch.no_grad():
                logits = self.target.lm_head(self._after_prompt(part))
            for i, p in enumerate(part):
                for j in range(len(p) + 1):
                    self._target.setdefault(p[:j], logits[i, j].clone())

    def target_law_logits(self, path: tuple) -> torch.Tensor:
        self._target_paths([path])
        return self._target[path]

    def _features(self, committed: list[tuple]) -> None:
        need = sorted({c for c in committed if c not in self._feats})
        for k in range(0, len(need), 64):
            part = need[k : k + 64]
            f = self._after_prompt(part)
            for i, c in enumerate(part):
                self._feats[c] = torch.cat([self._prompt_feats, f[i, : len(c) + 1]])

    def _draft_at(self, keys: list[tuple]) -> None:
        """The head's outputs at (committed, prefix) keys whose parents (committed,
        prefix[:-1]) are known (the tree expands parents first); keys with sequences of the
        same length go through the head in one batched forward."""
        groups: dict = collections.defaultdict(list)
        for c, prefix in keys:
            groups[len(self.prompt) + len(c) + len(prefix) - 1].append((c, prefix))
        emb = self.target.model.embed_tokens
        for n, group in groups.items():
            self.misses["draft"] += len(group)
            feats, toks = [], []
            for c, prefix in group:
                seq = self.prompt + list(c)  # pairs (f_t, x_{t+1}) up to the root seq[-1], then
                f = [self._feats[c][:-1]]  # (the head's feature at prefix[:j], prefix[j])
                f += [self._h[(c, prefix[:j])].unsqueeze(0) for j in range(len(prefix))]
                feats.append(torch.cat(f))
                toks.append(seq[1:] + list(prefix))
            with torch.no_grad():
                out = self.head(
                    torch.stack(feats),
                    emb(torch.tensor(toks)),
                    torch.arange(1, n + 1).unsqueeze(0).expand(len(group), n),
                    causal_mask(n),
                )[:, -1]
                logits = self.head.logits(self.target.lm_head, out)
            for i, key in enumerate(group):
                self._h[key], self._draft[key] = out[i], logits[i]

    # ---- SpecModel ----
    def draft_logits(self, query: DraftQuery) -> torch.Tensor:
        b, n = query.valid.shape
        out = torch.zeros((b, n, self.vocab_size))
        prefixes, valid = query.prefixes.tolist(), query.valid.tolist()
        keys = [
            [(self.committed[i], tuple(t for t in prefixes[i][j] if t >= 0)) if valid[i][j] else None for j in range(n)]
            for i in range(b)
        ]
        self._features([k[0] for row in keys for k in row if k is not None])
        need = sorted({k for row in keys for k in row if k is not None and k not in self._draft})
        if need:
            self._draft_at(need)
        for i in range(b):
            for j in range(n):
                if keys[i][j] is not None:
                    out[i, j] = self._draft[keys[i][j]]
        return out

    def target_logits(self, tree: DraftTree):
        """The verifier's lazy form: a callable (requests [n], nodes [n]) -> [n, V], so only
        the nodes the walk visits are ever computed."""
        prefixes = tree.prefixes

        def at(ix: torch.Tensor, nodes: torch.Tensor) -> torch.Tensor:
            keys = [
                self.committed[i] + tuple(t for t in p if t >= 0)
                for i, p in zip(ix.tolist(), prefixes[ix, nodes].tolist())
            ]
            self._target_paths(keys)
            return torch.stack([self._target[k] for k in keys]) if keys else torch.zeros((0, self.vocab_size))

        return at

    def advance(self, tree: DraftTree, result: VerifyResult) -> None:
        self.committed = [tuple(c) + tuple(result.output(i)) for i, c in enumerate(self.committed)]


def _law(logits: torch.Tensor, temperature: float) -> dict:
    p = torch.softmax(logits.to(torch.float64) / temperature, -1).numpy()
    nz = np.nonzero(p > 0)[0]
    return {int(t): float(p[t]) for t in nz}


def first_tokens_check(
    target,
    head,
    prompt: list[int],
    cfg: Params,
    samples: int,
    alpha: float,
    temperature: float = 1.0,
    batch: int = 250,
    second: int = 2,
    seed: int = 0,
    progress=None,
) -> dict:
    """(a): ``samples`` speculative runs of two tokens from ``prompt``; the first token
    against p(. | prompt), the second against p(. | prompt, x) for the ``second`` most
    frequent first tokens x. alpha is the total over the 1 + ``second`` tests."""
    t0 = time.perf_counter()
    model = PathTableLM(target, head, prompt, batch)
    gen = torch.Generator().manual_seed(seed)
    T = torch.full((batch,), float(temperature), dtype=torch.float64)
    pairs: list[tuple[int, int]] = []
    while len(pairs) < samples:
        model.reset()
        _, r1 = run_cycle(model, cfg, T, generator=gen)
        _, r2 = run_cycle(model, cfg, T, generator=gen)
        for i in range(batch):
            o = r1.output(i) + r2.output(i)
            pairs.append((o[0], o[1]))
        if progress:
            progress(f"    {min(len(pairs), samples)}/{samples} two-token samples, {time.perf_counter() - t0:.0f} s")
    pairs = pairs[:samples]
    tests = 1 + second
    a = alpha / tests
    first = collections.Counter(p[0] for p in pairs)
    results = [
        {"token": "first", "given": None, **gof_json(gof(first, _law(model.target_law_logits(()), temperature), a))}
    ]
    for x, _ in first.most_common(second):
        cond = collections.Counter(p[1] for p in pairs if p[0] == x)
        law = _law(model.target_law_logits((x,)), temperature)
        results.append({"token": "second", "given": x, **gof_json(gof(cond, law, a))})
    return {
        "samples": samples,
        "alpha_total": alpha,
        "tests": results,
        "passed": not any(r["reject"] for r in results),
        "misses": dict(model.misses),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def gof_json(r) -> dict:
    return {
        "reject": r.reject,
        "n": r.n,
        "bins": r.bins,
        "chi2": round(r.statistic, 2),
        "p_value": r.p_value,
        "alpha": r.alpha,
        "detectable_tv": round(r.detectable_tv, 4),
        "impossible": r.impossible[:5],
    }


def two_sample(a: list, b: list, alpha: float, power: float = 0.99) -> dict:
    """Chi-square homogeneity of two equal-size samples of outcomes. Outcomes with fewer
    than 10 occurrences in both samples together are merged into one tail bin. Detects
    (power ``power``) any TV >= delta with 2 n delta^2 >= the noncentrality needed, i.e.
    ``detectable_tv(n / 2, df, alpha)`` (Cauchy-Schwarz on sum (p - q)^2 / ((p + q) / 2))."""
    ca, cb = collections.Counter(a), collections.Counter(b)
    keys = sorted(set(ca) | set(cb))
    tot = np.array([ca[k] + cb[k] for k in keys], dtype=float)
    groups = merge_bins(tot / 2.0)
    table = np.array([[sum(ca[keys[i]] for i in g) for g in groups], [sum(cb[keys[i]] for i in g) for g in groups]])
    if table.shape[1] < 2:
        return {"reject": False, "bins": 1, "p_value": 1.0, "alpha": alpha, "detectable_tv": float("inf")}
    chi2, pv, dof, _ = sstats.chi2_contingency(table, correction=False)
    n = min(len(a), len(b))
    return {
        "reject": bool(pv < alpha),
        "n_each": n,
        "bins": int(table.shape[1]),
        "chi2": round(float(chi2), 2),
        "p_value": float(pv),
        "alpha": alpha,
        "detectable_tv": round(detectable_tv(n // 2, int(dof), alpha, power), 4),
    }


def later_token_check(
    target,
    head,
    prompt: list[int],
    cfg: Params,
    samples: int,
    alpha: float,
    index: int = 12,
    temperature: float = 1.0,
    seed: int = 0,
    progress=None,
) -> dict:
    """(b): the ``index``-th generated token, speculative (``SpecLM``, cycles until it
    exists) vs plain sampling (batched autoregressive forwards), two-sample test."""
    from transformers import DynamicCache

    t0 = time.perf_counter()
    base = SpecLM(target, head, prompt)
    gen = torch.Generator().manual_seed(seed)
    T = torch.tensor([float(temperature)], dtype=torch.float64)
    spec, cycles = [], 0
    for s in range(samples):
        model = base.fork()
        out: list = []
        while len(out) < index:
            _, r = run_cycle(model, cfg, T, generator=gen)
            out += r.output(0)
            cycles += 1
        spec.append(out[index - 1])
        if progress and (s + 1) % 100 == 0:
            progress(f"    {s + 1}/{samples} speculative runs, {time.perf_counter() - t0:.0f} s")
    plain: list = []
    chunk = 250
    with torch.no_grad():
        while len(plain) < samples:
            b = min(chunk, samples - len(plain))
            cache = DynamicCache()
            ids = torch.tensor([prompt] * b)
            for _ in range(index):
                forward = target(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
                logits = forward.logits[:, -1].to(torch.float64)
                ids = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=gen)
            plain += ids[:, 0].tolist()
    res = two_sample(spec, plain, alpha)
    return {
        "index": index,
        "samples": samples,
        "spec_cycles": cycles,
        "passed": not res["reject"],
        **res,
        "seconds": round(time.perf_counter() - t0, 1),
    }
