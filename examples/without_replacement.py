"""Samplers that draw several tokens at once, written from their papers: Gumbel-max and
Gumbel-top-k races over ``torch.rand`` (ordered draws without replacement), recursive
rejection without replacement, k i.i.d. drafts, and block verification. Exact certification
reads each row of uniforms as a race (docs/gate.md, "Races over uniforms") and certifies
them exactly; each lossless design has a planted bug an engine could ship beside it.

    rheo gate --impl examples.without_replacement:GumbelChain          # lossless, certified exactly
    rheo gate --impl examples.without_replacement:UntemperedKeys       # exits 1
    rheo gate --impl examples.without_replacement:RecursiveWithoutReplacement   # lossless
    rheo gate --impl examples.without_replacement:ResidualRejectedOnly          # exits 1
    rheo gate --impl examples.without_replacement:WithReplacementRatio          # exits 1
    rheo gate --impl examples.without_replacement:IidDrafts            # lossless
    rheo gate --impl examples.without_replacement:BlockVerification    # lossless
    rheo gate --impl examples.without_replacement:BlockResidualLastLaw # exits 1
    rheo gate --impl examples.without_replacement:SampledTree          # lossless: build_tree + verify
    rheo gate --impl examples.without_replacement:SampledTreeFirstLaw  # exits 1

- ``GumbelChain``: a chain (K = 1) drafted by Gumbel-max, ``argmax(log q - log(-log u))``
  over a row of uniforms; standard rejection; correction and bonus by Gumbel-max too.
  ``UntemperedKeys``: the draft keys from the untempered logits while the acceptance ratio
  uses the tempered q (lossy where T != 1).
- ``RecursiveWithoutReplacement``: a tree whose every node draws K children by Gumbel-top-K
  (an ordered sample without replacement from q), verified by recursive rejection sampling
  without replacement (Jeon et al. 2024, arXiv 2402.14160): child i is accepted with
  probability min(1, r(x_i) / q_i(x_i)), where q_i is q renormalised over the tokens not yet
  drawn; a rejection sets r to norm(max(r - q_i, 0)). ``ResidualRejectedOnly``: a rejection
  only zeroes the rejected token in r. ``WithReplacementRatio``: q itself, not q_i, in the
  ratio and the residual.
- ``IidDrafts``: K i.i.d. children per node (SpecTr's draft set, with replacement), verified
  by recursive rejection with r <- norm(max(r - q, 0)).
- ``BlockVerification``: a chain verified jointly (Sun et al. 2024, arXiv 2403.10444):
  p_0 = 1, p_i = min(1, p_{i-1} M_b(x_i) / M_s(x_i)); for i < L, h_i = m_i / (m_i + 1 - p_i)
  with m_i = sum_x max(p_i M_b(x | x^i) - M_s(x | x^i), 0), and h_L = p_L; tau is the last i
  whose coin eta_i <= h_i (0 if none), and the next token comes from M_b(. | x^L) when
  tau = L, else from norm(max(p_tau M_b - M_s, 0)) at x^tau. ``BlockResidualLastLaw``: that
  residual without the weight p_tau, max(M_b - M_s, 0).
- ``SampledTree``: ``RecursiveWithoutReplacement`` through ``build_tree`` and ``verify``: every
  child a sample with the law it was drawn from (``sample_probs``) and its place in the draw
  (``draw_order``, docs/gate.md "Nodes that draw several children"). ``SampledTreeFirstLaw``:
  every sibling verified against the first one's law.

Every design draws the same values on every run (a fixed schedule: one row of V uniforms per
node slot, whether the slot is reached or not), as exact certification needs. Trees take
policy "topk" configurations with K = 2 to depth 2 or K = 3 at depth 1 (their own design: K
children per node to depth D; the budget, beam and m do not apply) and T > 0, no filters.
"""

from __future__ import annotations

import torch

FILTERS = ("target_top_k", "target_top_p", "target_min_p", "draft_top_k")


def _law(logits, temperature: float) -> torch.Tensor:
    return torch.softmax(torch.as_tensor(logits, dtype=torch.float64) / temperature, dim=-1)


def _normalised(x: torch.Tensor, fallback: torch.Tensor) -> torch.Tensor:
    """x / sum(x); ``fallback`` where x has no mass (a branch of probability 0)."""
    total = x.sum()
    return x / total if float(total) > 0 else fallback


def gumbel_keys(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """log w - log(-log u): the Gumbel-max keys of a row of uniforms (-inf where w = 0)."""
    return weights.log() - (-u.log()).log()


def gumbel_max(weights: torch.Tensor, u: torch.Tensor) -> int:
    return int(torch.argmax(gumbel_keys(weights, u)))


def gumbel_top_k(weights: torch.Tensor, u: torch.Tensor, k: int) -> list[int]:
    """The first k of an ordered sample without replacement (k at most the tokens with mass)."""
    k = min(k, int((weights > 0).sum()))
    return torch.topk(gumbel_keys(weights, u), k).indices.tolist()


def _plain(config: dict) -> bool:
    return config["temperature"] > 0 and all(config.get(k) is None for k in FILTERS)


class GumbelChain:
    """Lossless: a chain drafted by Gumbel-max, verified by standard rejection."""

    follows_uniforms = False

    def supports(self, config: dict) -> bool:
        return config["K"] == 1 and config["policy"] == "rheo" and config["m"] == 0 and _plain(config)

    def draft_weights(self, logits, temperature: float) -> torch.Tensor:
        return _law(logits, temperature)

    def cycle(self, draft_logits, target_logits, config: dict, temperature: float) -> list[int]:
        L = int(min(config["depth"], config["budget"]))
        V = config["vocab_size"]
        keys_u = torch.rand(L, V, dtype=torch.float64)  # one row per draft position
        coins = torch.rand(L, dtype=torch.float64)
        last_u = torch.rand(V, dtype=torch.float64)  # the correction or the bonus
        path: tuple = ()
        drafts, qs = [], []
        for i in range(L):
            logits = draft_logits([path])[0]
            qs.append(_law(logits, temperature))
            drafts.append(gumbel_max(self.draft_weights(logits, temperature), keys_u[i]))
            path = (*path, drafts[-1])
        ps = _law(target_logits([tuple(drafts[:i]) for i in range(L + 1)]), temperature)
        out = []
        for i, x in enumerate(drafts):
            if bool(coins[i] * qs[i][x] <= ps[i][x]):  # u <= p(x) / q(x)
                out.append(x)
                continue
            residual = _normalised(torch.clamp(ps[i] - qs[i], min=0), ps[i])
            return [*out, gumbel_max(residual, last_u)]
        return [*out, gumbel_max(ps[L], last_u)]


class UntemperedKeys(GumbelChain):
    """Lossy where T != 1: the Gumbel keys from the raw logits, the ratio from the tempered q."""

    def draft_weights(self, logits, temperature: float) -> torch.Tensor:
        return _law(logits, 1.0)


class _Tree:
    """A full K-ary tree to depth D, every node slot's children drawn from one row of
    uniforms (slots in breadth-first order), one coin per child slot, one row for the last
    token; ``children`` and ``accepts`` are the designs."""

    follows_uniforms = False

    def supports(self, config: dict) -> bool:
        """K children per node to depth D with K^D small: exact certification enumerates every
        order of every visited node's children ((V! / (V - K)!)^D orders), so K = 3 at depth 1 only."""
        small = config["K"] == 2 and config["depth"] <= 2 or config["K"] == 3 and config["depth"] == 1
        return config["policy"] == "topk" and small and _plain(config)

    def slots(self, K: int, D: int) -> list[tuple[int, ...]]:
        """The node slots that draw children: child-index paths of length < D."""
        out, level = [()], [()]
        for _ in range(D - 1):
            level = [(*s, i) for s in level for i in range(K)]
            out += level
        return out

    def cycle(self, draft_logits, target_logits, config: dict, temperature: float) -> list[int]:
        K, D, V = config["K"], config["depth"], config["vocab_size"]
        slots = self.slots(K, D)
        rows = self.draw_rows(len(slots), K, V)
        coins = torch.rand(len(slots), K, dtype=torch.float64)
        last_u = torch.rand(V, dtype=torch.float64)
        slot, path, out = (), (), []
        while True:
            q = _law(draft_logits([path])[0], temperature)
            p = _law(target_logits([path])[0], temperature)
            s = slots.index(slot)
            kids = self.children(q, rows[s], K)
            picked, residual = self.verify(p, q, kids, coins[s])
            if picked is None:
                return [*out, gumbel_max(residual, last_u)]
            out.append(kids[picked])
            slot, path = (*slot, picked), (*path, kids[picked])
            if len(out) == D:
                return [*out, gumbel_max(_law(target_logits([path])[0], temperature), last_u)]

    def draw_rows(self, n: int, K: int, V: int) -> torch.Tensor:
        return torch.rand(n, V, dtype=torch.float64)

    def children(self, q: torch.Tensor, row: torch.Tensor, K: int) -> list[int]:
        raise NotImplementedError

    def verify(self, p: torch.Tensor, q: torch.Tensor, kids: list[int], coins: torch.Tensor) -> tuple:
        raise NotImplementedError


class RecursiveWithoutReplacement(_Tree):
    """Lossless: Gumbel-top-K children, recursive rejection without replacement."""

    def children(self, q: torch.Tensor, row: torch.Tensor, K: int) -> list[int]:
        return gumbel_top_k(q, row, K)

    def residual(self, r: torch.Tensor, q_i: torch.Tensor, x: int) -> torch.Tensor:
        return _normalised(torch.clamp(r - q_i, min=0), r)

    def ratio_law(self, q: torch.Tensor, q_i: torch.Tensor) -> torch.Tensor:
        return q_i

    def verify(self, p: torch.Tensor, q: torch.Tensor, kids: list[int], coins: torch.Tensor) -> tuple:
        r, q_i = p, q
        for i, x in enumerate(kids):
            law = self.ratio_law(q, q_i)
            if bool(coins[i] * law[x] <= r[x]):
                return i, r
            r = self.residual(r, law, x)
            rest = q_i.clone()
            rest[x] = 0.0
            q_i = _normalised(rest, q_i)
        return None, r


class ResidualRejectedOnly(RecursiveWithoutReplacement):
    """Lossy: a rejection removes only the rejected token from the residual."""

    def residual(self, r: torch.Tensor, q_i: torch.Tensor, x: int) -> torch.Tensor:
        out = r.clone()
        out[x] = 0.0
        return _normalised(out, r)


class WithReplacementRatio(RecursiveWithoutReplacement):
    """Lossy: the with-replacement q in the ratio and the residual of a without-replacement draw."""

    def ratio_law(self, q: torch.Tensor, q_i: torch.Tensor) -> torch.Tensor:
        return q


class IidDrafts(_Tree):
    """Lossless: K i.i.d. children (Gumbel-max, one row each), recursive rejection with replacement."""

    def supports(self, config: dict) -> bool:
        return super().supports(config) and config["K"] == 2

    def draw_rows(self, n: int, K: int, V: int) -> torch.Tensor:
        return torch.rand(n, K, V, dtype=torch.float64)

    def children(self, q: torch.Tensor, row: torch.Tensor, K: int) -> list[int]:
        return [gumbel_max(q, row[i]) for i in range(K)]

    def verify(self, p: torch.Tensor, q: torch.Tensor, kids: list[int], coins: torch.Tensor) -> tuple:
        r = p
        for i, x in enumerate(kids):
            if bool(coins[i] * q[x] <= r[x]):
                return i, r
            r = _normalised(torch.clamp(r - q, min=0), r)
        return None, r


class BlockVerification:
    """Lossless: a chain verified as one block (Sun et al. 2024)."""

    follows_uniforms = False

    def supports(self, config: dict) -> bool:
        return config["K"] == 1 and config["policy"] == "rheo" and config["m"] == 0 and _plain(config)

    def residual(self, weight: float, target: torch.Tensor, draft: torch.Tensor) -> torch.Tensor:
        return torch.clamp(weight * target - draft, min=0)

    def cycle(self, draft_logits, target_logits, config: dict, temperature: float) -> list[int]:
        L = int(min(config["depth"], config["budget"]))
        V = config["vocab_size"]
        keys_u = torch.rand(L, V, dtype=torch.float64)
        eta = torch.rand(L, dtype=torch.float64)
        last_u = torch.rand(V, dtype=torch.float64)
        drafts: list[int] = []
        qs = []
        for i in range(L):
            qs.append(_law(draft_logits([tuple(drafts)])[0], temperature))
            drafts.append(gumbel_max(qs[-1], keys_u[i]))
        ps = _law(target_logits([tuple(drafts[:i]) for i in range(L + 1)]), temperature)
        weight, tau, weights = 1.0, 0, [1.0]
        for i in range(1, L + 1):
            x = drafts[i - 1]
            weight = min(1.0, weight * float(ps[i - 1][x]) / float(qs[i - 1][x]))
            weights.append(weight)
            if i < L:
                mass = float(torch.clamp(weight * ps[i] - qs[i], min=0).sum())
                h = mass / (mass + 1 - weight) if mass + 1 - weight > 0 else 0.0
            else:
                h = weight
            if bool(eta[i - 1] <= h):
                tau = i
        if tau == L:
            return [*drafts, gumbel_max(ps[L], last_u)]
        residual = self.residual(weights[tau], ps[tau], qs[tau])
        return [*drafts[:tau], gumbel_max(_normalised(residual, ps[tau]), last_u)]


class BlockResidualLastLaw(BlockVerification):
    """Lossy: the final residual max(M_b - M_s, 0), without the block's weight p_tau."""

    def residual(self, weight: float, target: torch.Tensor, draft: torch.Tensor) -> torch.Tensor:
        return torch.clamp(target - draft, min=0)


class SampledTree:
    """Lossless: ``RecursiveWithoutReplacement`` through ``build_tree`` and ``verify``. Every
    child is a sample (kind 1) with the law it was drawn from (``sample_probs``: q renormalised
    over the tokens its earlier siblings took) and its place in the draw (``draw_order``); the
    children are stored in token order, as an engine that sorts them would, so the verifier
    must read the draw order from the tree."""

    follows_uniforms = False

    def supports(self, config: dict) -> bool:
        """Depth 1 (K = 2 or 3): exact certification enumerates every tree build_tree can
        return before verifying each, and at depth 2 that is every order of every node's
        children (216 trees at V = 3, K = 2: about 20 s a case)."""
        return config["policy"] == "topk" and config["K"] in (2, 3) and config["depth"] == 1 and _plain(config)

    def build_tree(self, draft_logits, config: dict, temperature: float, u_draw) -> dict:
        K, D, V = config["K"], config["depth"], config["vocab_size"]
        slots = _Tree().slots(K, D)
        rows = torch.rand(len(slots), V, dtype=torch.float64)
        tokens, parents, kinds, order, probs, slot_of = [], [], [], [], [], []
        frontier = [((), -1)]  # (path, node index of its last token; -1: the root)
        for s in range(len(slots)):
            if s >= len(frontier):
                break
            path, parent = frontier[s]
            q = _law(draft_logits([path])[0], temperature)
            drawn = gumbel_top_k(q, rows[s], K)
            laws, left = [], q
            for x in drawn:  # the law each child was drawn from: q without its earlier siblings
                laws.append(left)
                rest = left.clone()
                rest[x] = 0.0
                left = _normalised(rest, left)
            for i, x in sorted(enumerate(drawn), key=lambda e: e[1]):  # stored in token order
                tokens.append(x)
                parents.append(parent)
                kinds.append(1)
                order.append(i)
                probs.append(laws[i])
                slot_of.append(i)
                if len(path) + 1 < D:
                    frontier.append(((*path, x), len(tokens) - 1))
        return {
            "tokens": tokens,
            "parents": parents,
            "kinds": kinds,
            "slots": slot_of,
            "sample_probs": torch.stack(probs).numpy() if probs else torch.zeros(0, V).numpy(),
            "draw_order": order,
        }

    def sibling_law(self, probs, children: list[int], i: int) -> torch.Tensor:
        return torch.as_tensor(probs[children[i]], dtype=torch.float64)

    def verify(self, tree: dict, target_logits, config: dict, temperature: float, uniforms) -> dict:
        K, D, V = config["K"], config["depth"], config["vocab_size"]
        n = len(tree["tokens"])
        coins = torch.rand(len(_Tree().slots(K, D)), K, dtype=torch.float64)
        last_u = torch.rand(V, dtype=torch.float64)
        ps = _law(target_logits, temperature)  # row 0 the root, row i + 1 node i
        node, accepted, level = -1, [], 0
        while True:
            children = sorted((i for i in range(n) if tree["parents"][i] == node), key=lambda i: tree["draw_order"][i])
            r = ps[node + 1]
            picked = None
            for i, c in enumerate(children):
                q_i = self.sibling_law(tree["sample_probs"], children, i)
                x = tree["tokens"][c]
                if bool(coins[level, i] * q_i[x] <= r[x]):
                    picked = c
                    break
                r = _normalised(torch.clamp(r - q_i, min=0), r)
            if picked is None:
                return {"tokens": [tree["tokens"][a] for a in accepted] + [gumbel_max(r, last_u)], "accepted": accepted}
            accepted.append(picked)
            node, level = picked, level + 1
            if len(accepted) == D:
                bonus = gumbel_max(ps[picked + 1], last_u)
                return {"tokens": [tree["tokens"][a] for a in accepted] + [bonus], "accepted": accepted}


class SampledTreeFirstLaw(SampledTree):
    """Lossy: every sibling verified against the first one's law (q itself): the
    with-replacement law of a without-replacement draw, as read from the tree."""

    def sibling_law(self, probs, children: list[int], i: int) -> torch.Tensor:
        return torch.as_tensor(probs[children[0]], dtype=torch.float64)
