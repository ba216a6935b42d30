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
    rheo gate --impl examples.without_replacement:BatchedSampledTree   # lossless, up to float32 rounding
    rheo gate --impl examples.without_replacement:FirstRowKeys         # exits 1
    rheo gate --impl examples.without_replacement:ResidualOfLastSibling # exits 1
    rheo gate --impl examples.without_replacement:RejectsEveryDraft    # lossless, but accepts no draft
    rheo gate --impl examples.without_replacement:BatchedSampledTreeAnySize --only exact  # outgrown cases named

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
- ``BatchedSampledTree``: the sampled tree as an engine writes it: each level's keys drawn by
  one ``torch.rand(rows, V)`` call, a batched float32 softmax, one ``topk`` over the rows,
  float64 coins; exact certification reads each row as its own race and finds the float32
  itself. ``FirstRowKeys``: the first row's keys read for every row of a level.
  ``ResidualOfLastSibling``: a rejection's residual restarts from p, forgetting the siblings
  tried before.
- ``RejectsEveryDraft``: lossless only because it never accepts a draft (the gate says so).

Every design has a ``law_dtype`` (float64; float32 in ``BatchedSampledTree``): a subclass
with ``law_dtype = torch.float32`` computes its laws as engines do and keeps its verdict, with
no ``exact_tolerance`` (tests/test_found_tolerance.py).

Every design draws the same values on every run (a fixed schedule: one row of V uniforms per
node slot, whether the slot is reached or not), as exact certification needs. Trees take
policy "topk" configurations with K = 2 to depth 2 or K = 3 at depth 1 (their own design: K
children per node to depth D; the budget, beam and m do not apply) and T > 0, no filters.
"""

from __future__ import annotations

import torch

FILTERS = ("target_top_k", "target_top_p", "target_min_p", "draft_top_k")


def _law(logits, temperature: float, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """softmax(logits / T) in ``dtype`` (each design's ``law_dtype``: float64, or float32 as
    engines compute it)."""
    p = torch.softmax(torch.as_tensor(logits, dtype=dtype) / temperature, dim=-1)
    if not bool(torch.isfinite(p).all()):  # a row of NaN, or of -inf everywhere: no law to sample
        raise ValueError("a logits row without a law (NaN, or -inf everywhere)")
    return p


class _Laws:
    """``law``: the tempered softmax in the design's ``law_dtype`` (float64 here; a subclass
    with ``law_dtype = torch.float32`` is the same design as an engine computes it, its coins
    still float64: exact certification finds the float32 itself, ``tests/test_found_tolerance.py``)."""

    law_dtype = torch.float64

    def law(self, logits, temperature: float) -> torch.Tensor:
        return _law(logits, temperature, self.law_dtype)


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


class GumbelChain(_Laws):
    """Lossless: a chain drafted by Gumbel-max, verified by standard rejection."""

    follows_uniforms = False

    def supports(self, config: dict) -> bool:
        return config["K"] == 1 and config["policy"] == "rheo" and config["m"] == 0 and _plain(config)

    def draft_weights(self, logits, temperature: float) -> torch.Tensor:
        return self.law(logits, temperature)

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
            qs.append(self.law(logits, temperature))
            drafts.append(gumbel_max(self.draft_weights(logits, temperature), keys_u[i]))
            path = (*path, drafts[-1])
        ps = self.law(target_logits([tuple(drafts[:i]) for i in range(L + 1)]), temperature)
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
        return _law(logits, 1.0, self.law_dtype)


class RejectsEveryDraft(GumbelChain):
    """Lossless, and useless: it drafts a chain as ``GumbelChain`` does, then rejects every
    draft and samples the first token from the target (the residual of a draft accepted with
    probability 0 is p itself). Exact certification calls it lossless, and says that it
    accepts no draft: one token per cycle, where the reference emits more on the same laws."""

    def cycle(self, draft_logits, target_logits, config: dict, temperature: float) -> list[int]:
        super().cycle(draft_logits, target_logits, config, temperature)  # its drafts, drawn and thrown away
        last_u = torch.rand(config["vocab_size"], dtype=torch.float64)
        return [gumbel_max(self.law(target_logits([()])[0], temperature), last_u)]


class _Tree(_Laws):
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
            q = self.law(draft_logits([path])[0], temperature)
            p = self.law(target_logits([path])[0], temperature)
            s = slots.index(slot)
            kids = self.children(q, rows[s], K)
            picked, residual = self.verify(p, q, kids, coins[s])
            if picked is None:
                return [*out, gumbel_max(residual, last_u)]
            out.append(kids[picked])
            slot, path = (*slot, picked), (*path, kids[picked])
            if len(out) == D:
                return [*out, gumbel_max(self.law(target_logits([path])[0], temperature), last_u)]

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


class BlockVerification(_Laws):
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
            qs.append(self.law(draft_logits([tuple(drafts)])[0], temperature))
            drafts.append(gumbel_max(qs[-1], keys_u[i]))
        ps = self.law(target_logits([tuple(drafts[:i]) for i in range(L + 1)]), temperature)
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


class SampledTree(_Laws):
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
            q = self.law(draft_logits([path])[0], temperature)
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
        ps = self.law(target_logits, temperature)  # row 0 the root, row i + 1 node i
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


class _Drafted:
    """One request's draft tree as a level grows it: each node's token, parent (-1 the root)
    and draw law (q without its earlier siblings), and the level's frontier (path, node)."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.parents: list[int] = []
        self.laws: list[torch.Tensor] = []
        self.frontier: list[tuple[tuple[int, ...], int]] = [((), -1)]

    def grow(self, q: torch.Tensor, order: torch.Tensor) -> None:
        """The frontier's children: q [n, V] its nodes' draft laws, order [n, K] their draws."""
        following = []
        for row, (path, parent) in enumerate(self.frontier):
            left = q[row]
            for x in order[row].tolist():
                if float(left[x]) <= 0:  # every token with mass is drawn already
                    break
                self.tokens.append(x)
                self.parents.append(parent)
                self.laws.append(left)
                rest = left.clone()
                rest[x] = 0.0
                left = _normalised(rest, left)
                following.append(((*path, x), len(self.tokens) - 1))
        self.frontier = following


class BatchedSampledTree(_Laws):
    """Lossless: the sampled tree as an engine batches it. The draft tree is built a level at
    a time: one ``torch.rand(K ** level, V)`` call draws the Gumbel keys of every node slot of
    the level (float32, the default dtype; the rows of slots the tree does not reach are drawn
    too: a fixed schedule), the draft laws of the level's nodes come from one batched softmax
    in float32, and one ``topk(keys, K, dim=-1)`` orders each row's children (a child whose
    law is 0 is dropped). The target scores every node of the tree in one call (float32 too),
    and the tree is verified by recursive rejection without replacement, with float64 coins
    (one row of K per level: one node of a level is visited) and a float64 row for the
    correction or the bonus. Exact certification reads each row of a level's keys as a race
    of its own (docs/gate.md, "Races over uniforms") and finds the float32 itself: lossless up
    to float32 rounding, with no ``exact_tolerance``.

    ``supports``: Top-K policy configurations with K = 2 or 3 children per node and T > 0, no
    filters, while the trees its levels can draw (V! / (V - K)! orders per node slot, every
    slot of the tree drawn: ``orders``) stay within ``MAX_ORDERS``, what the symbolic
    enumeration visits in seconds: K = 2 to depth 2 up to V = 4, K = 3 to depth 2 at V = 3,
    depth 3 at V = 2, depth 1 up to V = 5. Larger trees would be skipped by the gate as
    outgrown (K = 2, depth 3 at V = 3 is 6^7 = 279,936 trees; docs/gate.md, "Bounded and
    visible")."""

    follows_uniforms = False
    law_dtype = torch.float32
    MAX_ORDERS: float = 3_000  # every node slot's orders multiplied: the trees its levels can draw

    def supports(self, config: dict) -> bool:
        K, V, D = config["K"], config["vocab_size"], config["depth"]
        small = K in (2, 3) and self.orders(K, V, D) <= self.MAX_ORDERS
        return config["policy"] == "topk" and small and _plain(config)

    @staticmethod
    def orders(K: int, V: int, D: int) -> int:
        """The ordered child sets of a whole tree with every slot drawn: (V! / (V - K)!)^slots."""
        per = 1
        for i in range(min(K, V)):
            per *= V - i
        return per ** sum(K**level for level in range(D))

    def gumbel_keys(self, q: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """log q - log(-log u) [n, V]: each row's Gumbel keys (-inf where q is 0)."""
        return q.log() - (-u.log()).log()

    def children_order(self, keys: torch.Tensor, K: int) -> torch.Tensor:
        """Each row's children, in the order drawn: the top K of its keys [n, V] -> [n, K]."""
        return torch.topk(keys, K, dim=-1).indices

    def cycle(self, draft_logits, target_logits, config: dict, temperature: float) -> list[int]:
        return self.cycle_batch(draft_logits, target_logits, config, temperature, 1)[0]

    def cycle_batch(self, draft_logits, target_logits, config: dict, temperature: float, rows: int) -> list:
        """``rows`` requests in one engine batch: every draw holds each request's rows as its
        r-th slice along dim 0 (the ``cycle_batch`` contract), and a level's keys of every
        request come from one ``gumbel_keys`` call (one kernel launch in examples/kernel_tree.py)."""
        K, D, V = config["K"], config["depth"], config["vocab_size"]
        trees = [_Drafted() for _ in range(rows)]
        for level in range(D):
            slots = K**level
            u = torch.rand(rows * slots, V)  # [rows * K^level, V] float32: every slot of the level, one call
            live = [r for r in range(rows) if trees[r].frontier]
            if not live:
                continue
            paths = [path for r in live for path, _ in trees[r].frontier]
            q = self.law(draft_logits(paths), temperature)  # [nodes of the level, V]
            picks = [u[r * slots : r * slots + len(trees[r].frontier)] for r in live]  # [n_r, V] each
            keys = self.gumbel_keys(q, picks[0] if len(picks) == 1 else torch.cat(picks))  # [nodes, V]
            at = 0
            for r in live:
                n = len(trees[r].frontier)
                trees[r].grow(q[at : at + n], self.children_order(keys[at : at + n], min(K, V)))  # [n, K]
                at += n
        coins = torch.rand(rows * D, K, dtype=torch.float64)  # [rows * D, K]: one row of K per level
        last_u = torch.rand(rows, V, dtype=torch.float64)  # [rows, V]: the correction or the bonus
        return [
            self.verify_tree(trees[r], target_logits, temperature, D, coins[r * D : (r + 1) * D], last_u[r])
            for r in range(rows)
        ]

    def verify_tree(self, tree: _Drafted, target_logits, temperature: float, D: int, coins, last_u) -> list[int]:
        """Recursive rejection without replacement down the drafted tree: coins [D, K], last_u [V]."""
        tokens, parents, laws = tree.tokens, tree.parents, tree.laws
        paths = [()] + [self.path(tokens, parents, i) for i in range(len(tokens))]
        ps = self.law(target_logits(paths), temperature).double()  # [1 + nodes, V]: row 0 the root
        node, out = -1, []
        while True:
            children = [i for i in range(len(tokens)) if parents[i] == node]  # in draw order
            picked, r = self.walk(ps[node + 1], children, tokens, laws, coins[len(out)])
            if picked is None:
                return [*out, gumbel_max(r, last_u)]
            out.append(tokens[picked])
            node = picked
            if len(out) == D:
                return [*out, gumbel_max(ps[node + 1], last_u)]

    @staticmethod
    def path(tokens: list[int], parents: list[int], i: int) -> tuple[int, ...]:
        out = []
        while i >= 0:
            out.append(tokens[i])
            i = parents[i]
        return tuple(reversed(out))

    def walk(self, p: torch.Tensor, children: list[int], tokens: list[int], laws: list, coins: torch.Tensor) -> tuple:
        """Recursive rejection without replacement over one node's children (in draw order):
        (the accepted child or None, the residual law)."""
        r = p
        for i, c in enumerate(children):
            q_i, x = laws[c].double(), tokens[c]
            if bool(coins[i] * q_i[x] <= r[x]):
                return c, r
            r = self.residual(p, r, q_i)
        return None, r

    def residual(self, p: torch.Tensor, r: torch.Tensor, q_i: torch.Tensor) -> torch.Tensor:
        return _normalised(torch.clamp(r - q_i, min=0), r)


class BatchedSampledTreeAnySize(BatchedSampledTree):
    """``BatchedSampledTree`` with every tree size admitted (K = 3, depth-3 trees at V = 3
    among them: 1.3e10 trees): what the gate does when ``supports`` admits more than exact
    certification can enumerate (docs/gate.md, "Bounded and visible"); the whole gate on it
    finishes within its budgets: exact certification 300 s, each statistical check 60 s."""

    MAX_ORDERS = float("inf")
    time_budget = 60  # seconds per statistical check: its cycles sized to its speed (docs/gate.md)


class FirstRowKeys(BatchedSampledTree):
    """Lossy: the keys of a level's first row are read for every row of the level (a stride
    of 0 over the rows), so every node of a level gets the children order drawn for the
    first one, from the first node's draft law, while each is verified against its own."""

    def children_order(self, keys: torch.Tensor, K: int) -> torch.Tensor:
        return torch.topk(keys[:1], K, dim=-1).indices.expand(keys.shape[0], -1)


class ResidualOfLastSibling(BatchedSampledTree):
    """Lossy: after a rejection the residual starts again from p, so it forgets the siblings
    tried before the last one: norm(max(p - q_i, 0)) instead of norm(max(r - q_i, 0))."""

    def residual(self, p: torch.Tensor, r: torch.Tensor, q_i: torch.Tensor) -> torch.Tensor:
        return _normalised(torch.clamp(p - q_i, min=0), p)
