"""The fastpath's baselines, pinned down where the mutation run (mutmut over ``fastpath/``)
found them untested: the naive verifier (``verify_naive``) on designed coins and slots, the
full-vocabulary draft baseline (``expand_dense``) against its documented draws and pool
layout, and ``run_cycle``'s fresh uniforms and commit. (The wrong-on-purpose variants'
tests are in tests/test_fastpath_differential.py, beside the other variant checks.)
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rheo.fastpath import (  # noqa: E402
    FastConfig,
    TargetFilters,
    Uniforms,
    build_tree,
    expand,
    run_cycle,
)
from rheo.fastpath.expand_dense import expand_dense  # noqa: E402
from rheo.fastpath.pool import FILL, LEAD, SAMPLE  # noqa: E402
from rheo.testing import HashTableModel  # noqa: E402
from rheo.testing.ranges import assert_in_range  # noqa: E402

from .test_fastpath_models import _naive_equals_batched  # noqa: E402

# ---- the naive verifier on designed slots and coins ---------------------------------------


def test_naive_verifier_reaches_the_sample_after_a_pruned_lead():
    """A constant proxy of 0.99 ranks the sample above the lead, and a budget of 2 prunes the
    root's lead while its sample survives: slot 0 empty, slot 1 the sample. The naive loop must
    skip the empty slot and still run the stochastic step on the sample (docs/spec.md §4 step
    3), as ``verify`` does; stopping at the first empty slot skips it."""
    cfg = FastConfig(K=4, depth=2, budget=2, m=1, beam=1, draft_top_k=None, proxy=0.99)
    model = HashTableModel(40, 16, seed=5, dtype=torch.float64, scale=1.0)
    T = torch.ones(16, dtype=torch.float64)
    u = Uniforms.random(16, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(4))
    tree = build_tree(model.draft_logits, cfg, T, u)
    root = tree.children[:, 0]
    assert bool(((root[:, 0] < 0) & (root[:, 1] >= 0)).all())  # the designed case: lead pruned, sample kept
    _naive_equals_batched(tree, model.target_logits(tree), T, cfg, u)


def test_naive_verifier_never_accepts_a_zero_probability_coin():
    """docs/spec.md §7: a coin accepts exactly when u < a, so a = 0 never accepts, not even
    with u = 0. A target top-k of 1 gives every child but the target's argmax w = 0 (the
    stochastic step's a = 0 for such a Y, each such lead's or fill's a = w(x) = 0), and every
    coin is u = 0: the naive verifier must reject those as ``verify`` does (a ``u <= a``
    coin accepts them)."""
    cfg = FastConfig(K=4, depth=2, budget=8, m=1, beam=2, draft_top_k=None, filters=TargetFilters(top_k=1))
    model = HashTableModel(30, 16, seed=2, dtype=torch.float64, scale=1.0)
    T = torch.ones(16, dtype=torch.float64)
    rand = Uniforms.random(16, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(1))
    zero = torch.zeros_like
    u = Uniforms(rand.u_draw, zero(rand.u_sample), zero(rand.u_det), rand.u_final)
    tree = build_tree(model.draft_logits, cfg, T, u)
    out = _naive_equals_batched(tree, model.target_logits(tree), T, cfg, u)
    assert_in_range(tree, out, cfg, 30)


@pytest.mark.parametrize(
    "det_coins",
    [(0.999, 0.0, 0.999, 0.999), (0.999, 0.999, 0.0, 0.999)],
    ids=["first fill on u_det[1]", "second fill on u_det[2]"],
)
def test_naive_verifier_numbers_the_deterministic_coins(det_coins):
    """docs/spec.md §7: u_det[d, j] is the coin of the deterministic child tried j-th (leads and
    fills in slot order; the sample child has its own coin u_sample and no deterministic step
    under policy "rheo"). Every root child survives (K = 4, m = 1: lead, sample, two fills),
    the stochastic coin is 0.999 (almost always a rejection) and exactly one deterministic
    coin is 0 (an acceptance wherever w > 0): the naive verifier must accept the same fill as
    ``verify``. Giving the sample a deterministic step of its own, or not advancing the coin
    index past the second child, reads the wrong coin."""
    cfg = FastConfig(K=4, depth=1, budget=4, m=1, draft_top_k=None)
    b = 16
    model = HashTableModel(50, b, seed=9, dtype=torch.float64, scale=1.0)
    T = torch.ones(b, dtype=torch.float64)
    rand = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(6))
    u_det = torch.tensor(det_coins, dtype=torch.float64).expand(b, cfg.depth + 1, cfg.K).contiguous()
    u = Uniforms(rand.u_draw, torch.full_like(rand.u_sample, 0.999), u_det, rand.u_final)
    tree = build_tree(model.draft_logits, cfg, T, u)
    assert bool((tree.children[:, 0] >= 0).all())  # the designed case: every root child survived
    out = _naive_equals_batched(tree, model.target_logits(tree), T, cfg, u)
    assert bool((out.lengths == 2).any())  # some request accepted a child on the zero coin


def test_naive_verifier_takes_float32_sample_laws_with_float64_target_logits():
    """A float32 draft (the tree's sample laws float32) verified against float64 target
    logits: the naive verifier builds r in the target law's dtype and gives ``verify``'s
    output exactly; r added in its own dtype fails."""
    cfg = FastConfig(K=4, depth=3, budget=10, m=1, draft_top_k=16)
    model = HashTableModel(60, 8, seed=3, dtype=torch.float32)
    T = torch.tensor([1.0, 0.7, 0.0, 1.3] * 2, dtype=torch.float64)
    u = Uniforms.random(8, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(2))
    tree = build_tree(model.draft_logits, cfg, T, u)
    assert tree.sample_probs.dtype == torch.float32
    _naive_equals_batched(tree, model.target_logits(tree).double(), T, cfg, u)


# ---- run_cycle ----------------------------------------------------------------------------


def test_run_cycle_draws_fresh_uniforms_without_a_generator():
    """``run_cycle`` without uniforms or a generator draws fresh uniforms from torch's default
    generator on the model's device (its docstring: "fresh ones from ``generator``", None
    being the default one): a whole cycle, every value in range."""
    cfg = FastConfig(K=3, depth=3, budget=8, m=1, draft_top_k=16)
    model = HashTableModel(60, 4, seed=5, dtype=torch.float64)
    tree, result = run_cycle(model, cfg, 0.8)
    assert_in_range(tree, result, cfg, 60)


def test_run_cycle_commits_the_tree_it_built():
    """``run_cycle`` drafts, verifies and commits: the model's ``advance(tree, result)`` (the
    model interface, ``rheo.fastpath.models``: a KV cache keeps the accepted path of that
    tree) hears the very tree and result the cycle returns."""

    class Recording(HashTableModel):
        def advance(self, tree, result):
            self.heard = (tree, result)
            super().advance(tree, result)

    cfg = FastConfig(K=3, depth=3, budget=8, m=1, draft_top_k=16)
    model = Recording(60, 4, seed=5, dtype=torch.float64)
    tree, result = run_cycle(model, cfg, 1.0, generator=torch.Generator().manual_seed(1))
    assert model.heard[0] is tree and model.heard[1] is result


# ---- the full-vocabulary draft baseline ---------------------------------------------------


def _dense_case(dtype=torch.float64):
    """Draft logits at 8 nodes of 4 requests over V = 40, temperatures 0.7, 1, 1.6 and 0 (the
    last: nothing to draw), and the policy-rheo config K = 4, m = 1."""
    cfg = FastConfig(K=4, depth=2, budget=5, m=1, draft_top_k=None)
    logits = 2 * torch.randn(4, 8, 40, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    T = torch.tensor([0.7, 1.0, 1.6, 0.0], dtype=torch.float64)
    return cfg, logits.to(dtype), torch.ones(4, 8, dtype=torch.bool), torch.zeros(4, 8, dtype=dtype), T


def _residual_logits(logits, cfg, T):
    """The dense residual's tempered logits by hand: the m leads (the m largest logits, lower
    id first on ties) set to -inf, the rest divided by T (T = 0 rows: left undivided)."""
    order = torch.sort(logits, dim=-1, descending=True, stable=True).indices
    masked = logits.scatter(-1, order[..., : cfg.m], float("-inf"))
    Tb = T.to(logits.dtype).view(-1, 1, 1)
    return masked, masked / torch.where(Tb == 0, torch.ones_like(Tb), Tb)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_dense_gumbel_draw_is_the_gumbel_max_of_the_tempered_residual(dtype):
    """``expand_dense`` (module docstring): the default draw of Y is a Gumbel-max over the whole
    vocabulary, on torch's generator: one uniform per logit from ``torch.rand`` in the logits'
    dtype (docs/fastpath.md: the working dtype is the model's), G = -log(-log U), and Y =
    argmax(logits / T + G) over the non-lead tokens, per node; at T = 0 the residual's argmax.
    Recomputed by hand from the same generator seed, the sample slot holds exactly that Y.
    Catches a draw that ignores the generator, uses another dtype or method, flips a sign of
    the Gumbel transform, multiplies by T, subtracts the noise, or takes one argmax over the
    whole batch."""
    cfg, logits, valid, u, T = _dense_case(dtype)
    pool = expand_dense(logits, valid, u, T, cfg, generator=torch.Generator().manual_seed(5))
    masked, scaled = _residual_logits(logits, cfg, T)
    U = torch.rand(logits.shape, generator=torch.Generator().manual_seed(5), dtype=dtype).clamp(min=1e-20)
    y = (scaled - torch.log(-torch.log(U))).argmax(-1)
    y[3] = masked[3].argmax(-1)  # T = 0
    assert torch.equal(pool.tokens[..., cfg.m], y)
    assert len(set(y[0].tolist())) > 1  # the noise moves the draw: not the argmax everywhere


def test_dense_multinomial_draw_is_torch_multinomial_of_the_tempered_residual():
    """``method="multinomial"`` (module docstring) draws Y with ``torch.multinomial`` on the
    generator from softmax(logits / T) over the non-lead tokens, one row per node; at T = 0
    the residual's argmax. Recomputed by hand from the same seed: the same Y at every node.
    Catches the methods swapped or the generator dropped."""
    cfg, logits, valid, u, T = _dense_case()
    pool = expand_dense(logits, valid, u, T, cfg, method="multinomial", generator=torch.Generator().manual_seed(9))
    masked, scaled = _residual_logits(logits, cfg, T)
    probs = torch.softmax(scaled, -1).reshape(-1, logits.shape[-1])
    y = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(9)).reshape(4, 8)
    y[3] = masked[3].argmax(-1)
    assert torch.equal(pool.tokens[..., cfg.m], y)


def test_dense_pool_slots_follow_the_drawn_token():
    """docs/spec.md §2 for the dense baseline's pools: slots 0..m-1 hold the leads x_1..x_m,
    slot m the drawn Y, slots m+1..K-1 the fills, the first K-m-1 tokens of U (rank order)
    without Y, each fill's rank its rank in the draft law and its factor its untempered q.
    At T = 1.6 over V = 40 Y falls inside the top K at some nodes and outside at others (both
    asserted), so a Y located in U by one search over the whole batch shows as a fill that
    repeats Y or skips a token."""
    cfg, logits, valid, u, T = _dense_case()
    T = torch.full((4,), 1.6, dtype=torch.float64)
    pool = expand_dense(logits, valid, u, T, cfg, generator=torch.Generator().manual_seed(3))
    q = torch.softmax(logits, -1)
    order = torch.sort(logits, dim=-1, descending=True, stable=True).indices
    K, m = cfg.K, cfg.m
    inside = []
    for i in range(4):
        for j in range(8):
            ranked = order[i, j].tolist()
            y = int(pool.tokens[i, j, m])
            inside.append(y in ranked[m:K])
            fills = [x for x in ranked[m:] if x != y][: K - m - 1]
            assert pool.tokens[i, j].tolist() == ranked[:m] + [y] + fills, (i, j)
            assert pool.kinds[i, j].tolist() == [LEAD] * m + [SAMPLE] + [FILL] * (K - m - 1)
            ranks = [int(pool.ranks[i, j, s]) for s in range(K) if s != m]
            assert ranks == [ranked.index(x) for x in ranked[:m] + fills]
            for s in range(K):
                if s != m:
                    assert float(pool.factors[i, j, s]) == float(q[i, j, int(pool.tokens[i, j, s])])
    assert any(inside) and not all(inside)


def test_dense_pool_equals_the_sparse_pool_at_temperature_zero_with_padding_and_massless_tokens():
    """``expand_dense`` builds ``expand``'s pools (draft_top_k None) and at T = 0 the very same
    ones (module docstring). Here some nodes are padding rows (valid False) and every node has
    only two tokens with mass (the other logits -inf): a slot holds a child only at a valid
    node and on a token of positive q (docs/spec.md §1: the ranked tokens are those with
    q(x) > 0), so the presence flags, tokens, kinds, ranks and factors of the present slots
    are ``expand``'s."""
    cfg = FastConfig(K=4, depth=2, budget=5, m=1, draft_top_k=None)
    g = torch.Generator().manual_seed(2)
    logits = torch.full((3, 4, 8), float("-inf"), dtype=torch.float64)
    for i in range(3):
        for j in range(4):
            keep = torch.randperm(8, generator=g)[:2]
            logits[i, j, keep] = torch.randn(2, generator=g, dtype=torch.float64)
    valid = torch.tensor([[True, True, False, False], [True, False, True, False], [True, True, True, True]])
    u = torch.rand(3, 4, generator=g, dtype=torch.float64)
    T = torch.zeros(3, dtype=torch.float64)
    a = expand(logits, valid, u, T, cfg)
    b = expand_dense(logits, valid, u, T, cfg, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a.ok, b.ok)
    assert int(a.ok.sum()) == 2 * int(valid.sum())  # the lead and the sample at each valid node
    for name in ("tokens", "kinds", "ranks", "factors"):
        x, z = getattr(a, name), getattr(b, name)
        assert torch.equal(torch.where(a.ok, x, torch.zeros_like(x)), torch.where(a.ok, z, torch.zeros_like(z))), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_static_dense_pool_is_the_default_one_and_needs_no_host(dtype):
    """``expand_dense(static=True)`` (what the benchmark captures on CUDA): on logits rounded
    to integers, so ties straddle the K-th place, the same pools as the default on the same
    Gumbel draws; on the ``meta`` device (no values) it makes no host sync and, once its
    constants are made, nothing off the device."""
    from rheo.bench.ops import OpCounter

    cfg = FastConfig(K=4, depth=2, budget=5, m=1, draft_top_k=None)
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(3, 4, 30, generator=g, dtype=dtype).mul(2).round()
    top = logits.sort(-1, descending=True).values
    assert bool((top[..., cfg.K - 1] == top[..., cfg.K]).any())  # a tie at the boundary somewhere
    valid = torch.ones(3, 4, dtype=torch.bool)
    u = torch.rand(3, 4, generator=g, dtype=dtype)
    T = torch.tensor([0.0, 0.7, 1.0], dtype=torch.float64)
    want = expand_dense(logits, valid, u, T, cfg, generator=torch.Generator().manual_seed(1))
    got = expand_dense(logits, valid, u, T, cfg, generator=torch.Generator().manual_seed(1), static=True)
    for name in ("ok", "tokens", "kinds", "ranks", "factors"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name
    meta = torch.device("meta")
    args = (logits.to(meta), valid.to(meta), u.to(meta), T.to(meta), cfg)
    expand_dense(*args, static=True)  # constants of the shape, made once
    with OpCounter(meta) as c:
        pool = expand_dense(*args, static=True)
    assert c.syncs == 0 and not c.off_device and pool.tokens.shape == (3, 4, cfg.K)
    with pytest.raises(RuntimeError, match="meta"):
        expand_dense(*args)  # the default ranking looks for a tie on the host
