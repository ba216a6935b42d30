"""A plain per-node implementation of RheoSampling, written from docs/spec.md alone.

It imports nothing from ``rheo``: it is what a serving-engine author would write, one node
at a time with numpy, and it implements the two entry points of the ``rheo gate --impl``
protocol (docs/gate.md, "Checking another implementation"):

- ``build_tree(draft_logits, config, temperature, u_draw) -> dict``   (docs/spec.md §1-§3, §7)
- ``verify(tree, target_logits, config, temperature, uniforms) -> dict`` (docs/spec.md §0, §4, §7)

    rheo gate --impl examples.loop_impl:LoopImplementation      # passes

``examples/buggy_impl.py`` subclasses it with one realistic bug each; the gate catches them.
"""

from __future__ import annotations

import numpy as np

LEAD, SAMPLE, FILL = 0, 1, 2


def softmax(logits: np.ndarray) -> np.ndarray:
    """softmax over the finite entries; -inf entries get probability 0."""
    out = np.zeros_like(logits, dtype=np.float64)
    ok = np.isfinite(logits)
    if ok.any():
        z = logits[ok] - logits[ok].max()
        e = np.exp(z)
        out[ok] = e / e.sum()
    return out


def rank(probs: np.ndarray) -> list[int]:
    """Tokens with positive probability, by (probability desc, id asc)."""
    ids = np.flatnonzero(probs > 0)
    return sorted(ids.tolist(), key=lambda t: (-probs[t], t))


def tempered(logits: np.ndarray, temperature: float, support: list[int]) -> np.ndarray:
    """softmax(logits / T) on ``support``; T = 0: one-hot on the best token (ties -> lower id)."""
    out = np.zeros(len(logits))
    if not support:
        return out
    sub = logits[support]
    if temperature == 0:
        best = max(support, key=lambda t: (logits[t], -t))
        out[best] = 1.0
        return out
    out[support] = softmax(sub / temperature)
    return out


def inverse_cdf(order: list[int], probs: np.ndarray, u: float) -> int:
    """The first token of ``order`` whose cumulative mass exceeds u (docs/spec.md §7)."""
    cum, chosen = 0.0, None
    for t in order:
        if probs[t] > 0:
            chosen = t
            cum += probs[t]
            if cum > u:
                break
    return chosen


class LoopImplementation:
    """Tree builder and verifier, one node at a time."""

    # ---- docs/spec.md §3: the order key ----
    def order_key(self, node: dict) -> tuple:
        return (-node["score"], len(node["slot_path"]), node["slot_path"])

    # ---- docs/spec.md §1-§2: one expansion ----
    def draft_law(self, logits: np.ndarray, config: dict) -> np.ndarray:
        """Sparse truncation (keep draft_top_k logits, ties -> lower id), then softmax."""
        k = config.get("draft_top_k")
        if k is not None and k < len(logits):
            keep = sorted(range(len(logits)), key=lambda t: (-logits[t], t))[:k]
            cut = np.full_like(logits, -np.inf)
            cut[keep] = logits[keep]
            logits = cut
        return softmax(logits)

    def expand(self, parent: dict, logits: np.ndarray, config: dict, temperature: float, u: float) -> list[dict]:
        K, m = config["K"], config.get("m") or 0
        q = self.draft_law(logits, config)
        ranked = rank(q)
        kids = []

        def child(slot, token, kind, factor, r=None):
            kids.append(
                {
                    "token": token,
                    "kind": kind,
                    "slot": slot,
                    "parent": parent,
                    "path": parent["path"] + (token,),
                    "slot_path": parent["slot_path"] + (slot,),
                    "score": parent["score"] * factor,
                    "r": r,
                }
            )

        if config["policy"] == "topk":
            for s, x in enumerate(ranked[:K]):
                child(s, x, LEAD, q[x])
            return kids
        leads, support = ranked[:m], ranked[m:]
        for s, x in enumerate(leads):
            child(s, x, LEAD, q[x])
        if not support:
            return kids
        log_q = np.full(len(q), -np.inf)
        log_q[q > 0] = np.log(q[q > 0])
        r = tempered(log_q, temperature, support)
        y = inverse_cdf(support, r, u)
        if m >= 1:
            proxy = min(q[leads[-1]], 1.0 - sum(q[x] for x in leads))
        else:
            proxy = min(q[ranked[0]] + config.get("epsilon", 0.0), 1.0)
        child(m, y, SAMPLE, proxy, r)
        fills = [x for x in support if x != y][: K - m - 1]
        for j, x in enumerate(fills):
            child(m + 1 + j, x, FILL, q[x])
        return kids

    # ---- docs/spec.md §3: the dynamic tree ----
    def build_tree(self, draft_logits, config: dict, temperature: float, u_draw) -> dict:
        D, B, R = config["depth"], config["beam"], config["budget"]
        root = {"path": (), "slot_path": (), "score": 1.0}
        e = 0

        def expand(node):
            nonlocal e
            logits = np.asarray(draft_logits([node["path"]]), dtype=np.float64)[0]
            kids = self.expand(node, logits, config, temperature, float(u_draw[e]))
            e += 1
            return kids

        layer = expand(root)
        recorded = list(layer)
        for _ in range(2, D + 1):
            new = []
            for node in sorted(layer, key=self.order_key)[:B]:
                new.extend(expand(node))
            layer = new
            recorded.extend(new)
        kept = sorted(recorded, key=self.order_key)[:R]
        index = {id(n): i for i, n in enumerate(kept)}
        V = len(np.asarray(draft_logits([()]))[0])
        sample_probs = np.zeros((len(kept), V))
        for i, n in enumerate(kept):
            if n["r"] is not None:
                sample_probs[i] = n["r"]
        return {
            "tokens": np.array([n["token"] for n in kept], dtype=np.int64),
            "parents": np.array(
                [index[id(n["parent"])] if n["parent"] is not root else -1 for n in kept], dtype=np.int64
            ),
            "kinds": np.array([n["kind"] for n in kept], dtype=np.int64),
            "slots": np.array([n["slot"] for n in kept], dtype=np.int64),
            "sample_probs": sample_probs,
        }

    # ---- docs/spec.md §0: the target law ----
    def target_law(self, logits: np.ndarray, config: dict, temperature: float) -> np.ndarray:
        p = tempered(logits, temperature, np.flatnonzero(np.isfinite(logits)).tolist())
        k, top_p, min_p = config.get("target_top_k"), config.get("target_top_p"), config.get("target_min_p")
        if k is not None:
            keep = rank(p)[:k]
            p = np.where(np.isin(np.arange(len(p)), keep), p, 0.0)
            p = p / p.sum()
        if top_p is not None:
            keep, cum = [], 0.0
            for t in rank(p):
                keep.append(t)
                cum += p[t]
                if cum >= top_p:
                    break
            p = np.where(np.isin(np.arange(len(p)), keep), p, 0.0)
            p = p / p.sum()
        if min_p is not None:
            p = np.where(p >= min_p * p.max(), p, 0.0)
            p = p / p.sum()
        return p

    # ---- docs/spec.md §4: RheoVerification ----
    def coin_uniform(self, uniforms: dict, d: int, step: int, stochastic: bool) -> float:
        """The uniform of a coin: u_sample[d], or u_det[d][j] for the j-th deterministic child."""
        return float(uniforms["u_sample"][d]) if stochastic else float(uniforms["u_det"][d][step])

    def bonus_law(self, p: np.ndarray, logits: np.ndarray, config: dict, temperature: float) -> np.ndarray:
        """The law of a bonus token (after a leaf): the node's target law ``p``."""
        return p

    def verify(self, tree: dict, target_logits, config: dict, temperature: float, uniforms: dict) -> dict:
        tokens, parents, kinds, slots = (np.asarray(tree[k]) for k in ("tokens", "parents", "kinds", "slots"))
        sample_probs = np.asarray(tree["sample_probs"])
        target_logits = np.asarray(target_logits, dtype=np.float64)
        children: dict = {}
        for i in sorted(range(len(tokens)), key=lambda i: slots[i]):
            children.setdefault(int(parents[i]), []).append(i)
        node, d, out, accepted = -1, 0, [], []
        while True:
            p = self.target_law(target_logits[node + 1], config, temperature)
            kids = children.get(node, [])
            w = p.copy()
            moved = None
            sample = [i for i in kids if kinds[i] == SAMPLE and config["policy"] == "rheo"]
            if sample:
                i = sample[0]
                y, r = int(tokens[i]), sample_probs[i]
                a = min(1.0, w[y] / r[y])
                if self.coin_uniform(uniforms, d, 0, True) < a:
                    moved = i
                else:
                    w = np.maximum(w - r, 0.0)
                    w = w / w.sum()
            j = 0
            for i in kids:
                if moved is not None:
                    break
                if i in sample:
                    continue
                x = int(tokens[i])
                if self.coin_uniform(uniforms, d, j, False) < w[x]:
                    moved = i
                    break
                j += 1
                w[x] = 0.0
                if w.sum() <= 0:
                    break
                w = w / w.sum()
            if not kids:  # a bonus token: the node's own target law
                w = self.bonus_law(p, target_logits[node + 1], config, temperature)
            if moved is None:  # bonus (no children) or correction token, in token-id order
                out.append(inverse_cdf(list(range(len(w))), w, float(uniforms["u_final"][d])))
                return {"tokens": out, "accepted": accepted}
            out.append(int(tokens[moved]))
            accepted.append(moved)
            node, d = moved, d + 1
