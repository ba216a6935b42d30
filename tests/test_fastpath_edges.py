"""The fastpath's edges that the mutation run (docs/tests.md, "Mutation testing") found
untested: the uniforms' dtype and device defaults, each check naming its caller and field, the
laws' documented shapes and buffers, the verification walk's ties and mass repair, the
workspace per thread. Each test names the mutant class it kills in its docstring."""

from __future__ import annotations

import dataclasses
import math
import threading
from fractions import Fraction

import pytest

torch = pytest.importorskip("torch")

from rheo.fastpath import (  # noqa: E402
    FastConfig,
    TargetFilters,
    Uniforms,
    build_tree,
    inverse_cdf,
    ranked_topk,
    run_cycle,
    target_law,
    tempered,
    verify,
)
from rheo.fastpath.config import Proxy  # noqa: E402
from rheo.fastpath.inputs import expect, expect_params  # noqa: E402
from rheo.fastpath.laws import softmax_or_zero, target_weights  # noqa: E402
from rheo.fastpath.pool import expand, ranked_draft_law, rheo_proxy, rheo_slots, topk_pool  # noqa: E402
from rheo.fastpath.verify import _workspace  # noqa: E402
from rheo.fastpath.walk import Walk  # noqa: E402
from rheo.reference import CaseError  # noqa: E402
from rheo.reference import Uniforms as ReferenceUniforms  # noqa: E402
from rheo.testing import HashTableModel  # noqa: E402

from .test_fastpath_models import _small_tree  # noqa: E402

F64 = torch.float64


# ---- Uniforms: dtype, device and the smallest sizes ----------------------------------------


def test_uniforms_are_float64_by_default_and_take_a_dtype_and_device():
    """``Uniforms.random`` and ``Uniforms.stack`` make float64 uniforms unless told otherwise
    (a float32 default would round every coin; docs/spec.md §7 compares in float64), honour
    ``dtype`` and ``device`` (the meta device stands in for an accelerator: a dropped
    ``device=`` puts the tensors on the CPU), and ``Uniforms.to`` moves and casts all four.
    The sizes may be 1 (one request, one slot, one beam, depth 1)."""
    one = Uniforms.random(1, K=1, B=1, D=1, generator=torch.Generator().manual_seed(0))
    assert [tuple(x.shape) for x in (one.u_draw, one.u_sample, one.u_det, one.u_final)] == [
        (1, 1),
        (1, 2),
        (1, 2, 1),
        (1, 2),
    ]
    u = Uniforms.random(2, K=3, B=2, D=2)
    assert {x.dtype for x in (u.u_draw, u.u_sample, u.u_det, u.u_final)} == {F64}
    meta = Uniforms.random(2, K=3, B=2, D=2, device="meta", dtype=torch.float32)
    assert {(x.device.type, x.dtype) for x in (meta.u_draw, meta.u_sample, meta.u_det, meta.u_final)} == {
        ("meta", torch.float32)
    }
    moved = u.to(device="meta", dtype=torch.float32)
    assert {(x.device.type, x.dtype) for x in (moved.u_draw, moved.u_sample, moved.u_det, moved.u_final)} == {
        ("meta", torch.float32)
    }
    cast = u.to(dtype=torch.float16)
    assert {x.dtype for x in (cast.u_draw, cast.u_sample, cast.u_det, cast.u_final)} == {torch.float16}

    ref = ReferenceUniforms(
        u_draw=(0.1, 0.2, 0.3), u_sample=(0.4, 0.5, 0.6), u_det=((0.7,) * 3,) * 3, u_final=(0.8,) * 3
    )
    stacked = Uniforms.stack([ref, ref])
    assert stacked.u_sample.dtype == F64 and stacked.u_sample[1, 1].item() == 0.5
    assert stacked.u_draw[0, 0].item() == 0.1  # float64: 0.1 exactly as the reference holds it
    on_meta = Uniforms.stack([ref], device="meta", dtype=torch.float32)
    assert (on_meta.u_det.device.type, on_meta.u_det.dtype) == ("meta", torch.float32)


# ---- every check names its caller and its field ---------------------------------------------


def test_verify_and_run_cycle_checks_name_themselves():
    """A refusal names the entry point the user called (``verify``, ``build_tree``,
    ``run_cycle``, ``inverse_cdf``) and the field: a check passed another caller's name, or none, points
    the user at the wrong function. Uniforms made for another batch are refused (a check
    that forgot the batch size would let them index out of range later)."""
    cfg, model, T, u, tree, logits = _small_tree()
    other = Uniforms.random(3, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(0))
    for name, call in (
        ("verify", lambda p: verify(tree, logits, T, p, u)),
        ("build_tree", lambda p: build_tree(model.draft_logits, p, T, u)),
    ):
        with pytest.raises(CaseError) as err:
            call(cfg.in_arithmetic("exact"))
        assert err.value.message.startswith(f"{name}: the fastpath computes in float64")
    with pytest.raises(TypeError, match=r"^verify: target_logits must be a \[b, R\+1, V\] tensor or a callable"):
        verify(tree, "logits", T, cfg, u)  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"^verify: uniforms\.u_draw must be a float tensor of shape \[b, 1\+B\(D-1\)\] = \[2, "
    ):
        verify(tree, logits, T, cfg, other)
    deeper = Uniforms(
        u.u_draw, torch.rand(2, 4, dtype=F64), torch.rand(2, 4, 3, dtype=F64), torch.rand(2, 4, dtype=F64)
    )
    with pytest.raises(
        ValueError, match=r"^verify: uniforms\.u_sample must be a float tensor of shape \[b, D\+1\] = \[2, 3\]"
    ):
        verify(tree, logits, T, cfg, deeper)  # uniforms for depth 3, params of depth 2
    with pytest.raises(
        ValueError, match=r"^verify: tree\.tokens must be a torch\.int64 tensor of shape \[b, R\] = \[\*, 6\]"
    ):
        verify(tree, logits, T, cfg.replace(budget=6), u)
    with pytest.raises(ValueError, match=r"^run_cycle: uniforms\.u_draw must be a float tensor of shape .* = \[2, "):
        run_cycle(model, cfg, 1.0, uniforms=other)
    with pytest.raises(ValueError, match=r"^run_cycle: uniforms\.u_det must be a float tensor .* = \[2, 3, 3\]"):
        run_cycle(model, cfg, 1.0, uniforms=Uniforms.random(2, 4, cfg.B, cfg.depth))
    with pytest.raises(ValueError, match=r"^inverse_cdf: probs must be a float tensor of shape \[\.\.\., n\]"):
        inverse_cdf(torch.ones(2, 3, dtype=torch.int64), torch.ones(2))


def _wrong_dtype(x):
    """A tensor of x's shape in a dtype its contract refuses: int64 -> int32, int8 -> int64,
    bool -> uint8, a float -> int64."""
    other = {torch.int64: torch.int32, torch.int8: torch.int64, torch.bool: torch.uint8}
    return x.to(other.get(x.dtype, torch.int64))


def _contract_refusals(obj, check, prefix, sizers):
    """Each tensor field of the dataclass ``obj`` given a refused dtype, and (with two or more
    dimensions, unless it is one of the ``sizers`` whose last size the others are held to)
    one column too few, must make ``check`` raise a ValueError starting with ``prefix +
    field``; returns the fields tried."""
    tried = []
    for field in dataclasses.fields(obj):
        x = getattr(obj, field.name)
        if not isinstance(x, torch.Tensor):
            continue
        bad = [_wrong_dtype(x)]
        if x.dim() >= 2 and x.shape[-1] > 1 and field.name not in sizers:
            bad.append(x[..., :-1])
        for wrong in bad:
            with pytest.raises(ValueError) as err:
                check(dataclasses.replace(obj, **{field.name: wrong}))
            assert str(err.value).startswith(f"{prefix}{field.name} must be a"), (field.name, str(err.value))
        tried.append(field.name)
    return tried


def test_tree_and_pool_checks_name_each_field_and_its_exact_dtype():
    """``DraftTree.__post_init__`` and ``Pool.expect`` name the caller and each field whose
    dtype or size breaks the contract, and hold the index tensors to their exact dtypes
    (int64, kinds int8, path scores float64): a kind-only check ("some integer") would let
    an int32 index through to a gather that needs int64, and a size read as None (any) would
    let a [.., W - 1] law through beside [.., W] ids. The ``draft_law: "dense"`` tensors are
    checked too."""
    cfg, model, T, u, tree, logits = _small_tree()
    dense_cfg = cfg.replace(draft_law="dense")
    dense_tree = build_tree(model.draft_logits, dense_cfg, T, u)
    assert dense_tree.verify_dense is not None
    sizers = {"tokens", "children", "prefixes", "sample_ids", "verify_dense"}  # R, K, D, W, V
    tried = _contract_refusals(dense_tree, lambda t: t, "DraftTree: ", sizers)
    assert len(tried) == len(dataclasses.fields(tree))  # every field is a tensor here
    with pytest.raises(
        ValueError, match=r"^verify: tree\.children must be a torch\.int64 tensor of shape \[b, R\+1, K\]"
    ):
        verify(dataclasses.replace(tree, children=tree.children[..., :-1]), logits, T, cfg, u)

    logits = torch.randn(2, 1, 7, generator=torch.Generator().manual_seed(0), dtype=F64)
    args = (logits, torch.ones(2, 1, dtype=torch.bool), torch.full((2, 1), 0.5, dtype=F64), torch.ones(2, dtype=F64))
    pool = expand(*args, dense_cfg)
    assert pool.dense is not None and pool.expect("here", 2, 1, 3) is pool
    assert len(_contract_refusals(pool, lambda p: p.expect("here", 2, 1, 3), "here: pool.", {"ids", "dense"})) == 9


def test_fastconfig_turns_epsilon_into_a_float():
    """``FastConfig`` is the float64 spelling: epsilon given as an int or a Fraction arrives
    in ``Params`` as a float (a Fraction left in float64 parameters would make the proxy's
    arithmetic exact in one place and float in the others)."""
    for eps in (Fraction(1, 8), 0):
        got = FastConfig(K=3, depth=2, budget=5, m=0, epsilon=eps).epsilon
        assert type(got) is float and got == float(eps)


# ---- laws: shapes, buffers and temperatures --------------------------------------------------


def test_inverse_cdf_on_any_leading_shape_with_and_without_a_buffer():
    """``inverse_cdf`` on [2, 2, n] laws: each row's own first index whose cumulative mass
    exceeds u, and where rounding leaves u above the total, that row's own last entry with
    mass (a fallback that searched the flattened tensor, or flipped the wrong axis, picks
    another row's). With ``out`` the cumulative sums are written there (the verifier's
    workspace: no new buffer per depth), and the answer is the same. A 1-D law works too."""
    probs = torch.tensor(
        [[[0.5, 0.5, 0.0, 0.0], [0.0, 0.25, 0.25, 0.5]], [[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.5, 0.0]]], dtype=F64
    )
    u = torch.tensor([[0.4, 0.6], [2.0, 0.99]], dtype=F64)  # 2.0: above the total, the fallback
    want = torch.tensor([[0, 3], [0, 2]])
    assert torch.equal(inverse_cdf(probs, u), want)
    over = torch.tensor([[1.5, 1.5], [1.5, 1.5]], dtype=F64)  # every row falls back to its last entry with mass
    assert torch.equal(inverse_cdf(probs, over), torch.tensor([[1, 3], [0, 2]]))
    out = torch.empty_like(probs)
    assert torch.equal(inverse_cdf(probs, u, out=out), want)
    assert torch.equal(out, torch.cumsum(probs, -1))
    assert inverse_cdf(torch.tensor([0.5, 0.0, 0.5], dtype=F64), torch.tensor(0.7, dtype=F64)).item() == 2
    # u in float32 against float64 laws: compared in the law's dtype
    assert inverse_cdf(probs[0], torch.tensor([0.4, 0.6], dtype=torch.float32)).tolist() == [0, 3]


def test_target_weights_at_temperature_two_and_rows_of_different_scale():
    """``target_weights`` is ``target_law`` as (w, Z), p = w / Z: at T = 2 for every row
    (a shortcut that skipped the division whenever all T equal some constant would return
    p_1), with rows whose logits lie 1000 apart (the max must be taken per row: a global max
    underflows the lower row to 0 / 0), and on a one-token vocabulary with filters (Z = 1)."""
    logits = torch.tensor([[1000.0, 999.0, 998.0], [0.0, -1.0, -3.0]], dtype=F64)
    for T in (torch.full((2,), 2.0, dtype=F64), torch.tensor([0.5, 1.5], dtype=F64), torch.ones(2, dtype=F64)):
        w, Z = target_weights(logits.clone(), T)
        assert Z.shape == (2,)
        torch.testing.assert_close(w / Z.unsqueeze(1), target_law(logits, T), rtol=1e-14, atol=0)
    one = torch.zeros(2, 1, dtype=F64)
    w, Z = target_weights(one.clone(), torch.ones(2, dtype=F64), TargetFilters(top_p=0.5))
    assert w.tolist() == [[1.0], [1.0]] and Z.tolist() == [1.0, 1.0]


def test_top_p_keeps_tied_tokens_in_id_order_on_a_wide_vocabulary():
    """docs/spec.md §0: top-p ranks tokens by (probability desc, id asc). On 64 equally
    likely tokens, top_p = 1/2 keeps exactly ids 0..31 in every row; torch's unstable sort
    (``stable=False``) orders ties arbitrarily even on the CPU at this width, keeping another
    half."""
    V = 64
    logits = torch.zeros(3, V, dtype=F64)
    p = target_law(logits, torch.ones(3, dtype=F64), TargetFilters(top_p=0.5))
    want = torch.cat([torch.full((32,), 1 / 32, dtype=F64), torch.zeros(32, dtype=F64)])
    assert torch.equal(p, want.expand(3, V))


def test_softmax_or_zero_gives_an_all_minus_inf_row_no_mass():
    """``softmax_or_zero``: an all -inf row is all 0 (softmax gives NaN there), even where
    ``ok`` would let it through; a finite row is the softmax where ok."""
    x = torch.tensor([[float("-inf")] * 3, [0.0, 0.0, float("-inf")]], dtype=F64)
    p = softmax_or_zero(x, torch.ones(2, 3, dtype=torch.bool))
    assert p.tolist() == [[0.0, 0.0, 0.0], [0.5, 0.5, 0.0]]


def test_ranked_draft_law_pads_to_k_slots_when_fewer_tokens_are_kept():
    """docs/spec.md §1: W = max(k, K). With draft_top_k = 2 < K = 4 the two kept tokens are
    padded to four ranks (-inf logits, no mass, not ok), never more."""
    logits = torch.tensor([[[0.0, 2.0, 1.0, -1.0, -2.0]]], dtype=F64)
    vals, ids, q, ok = ranked_draft_law(
        logits, torch.ones(1, 1, dtype=torch.bool), FastConfig(K=4, depth=2, budget=6, m=1, draft_top_k=2)
    )
    assert vals.shape == ids.shape == q.shape == ok.shape == (1, 1, 4)
    assert ids[0, 0, :2].tolist() == [1, 2] and ok.tolist() == [[[True, True, False, False]]]
    assert q[0, 0, 2:].tolist() == [0.0, 0.0] and torch.isinf(vals[0, 0, 2:]).all()


def test_rheo_proxy_adds_epsilon_at_m_zero_and_caps_it_at_one():
    """docs/spec.md §2, m = 0: the proxy is min(q(x_1) + epsilon, 1), per row."""
    q = torch.tensor([[0.5, 0.3, 0.2], [0.9, 0.1, 0.0]], dtype=F64)
    got = rheo_proxy(q, FastConfig(K=3, depth=2, budget=5, m=0, epsilon=0.25))
    assert got.tolist() == [0.75, 1.0]


def test_rheo_slots_clamp_a_sample_ranked_beyond_the_kept_tokens():
    """A sample Y that ranks beyond the W kept tokens (j >= W - m) gets the last rank, W - 1,
    "clamped into range" as ``rheo_slots`` documents; the fills are the first ranks after
    the leads."""
    cfg = FastConfig(K=3, depth=2, budget=5, m=1)
    ok = torch.ones(1, 4, dtype=torch.bool)
    ranks, kinds, slot_ok = rheo_slots(ok, torch.tensor([3]), cfg)  # W = 4, m = 1: j = 3 is beyond
    assert ranks.tolist() == [[0, 3, 1]] and kinds.tolist() == [[0, 1, 2]] and slot_ok.tolist() == [[True] * 3]
    ranks, _, _ = rheo_slots(ok, torch.tensor([0]), cfg)  # Y is x_2: the fill skips it
    assert ranks.tolist() == [[0, 1, 2]]


# ---- the walk: coin ties, zero r(y), mass repair ---------------------------------------------


def _walk(w, Z, u_sample=0.0, u_det=0.0, K=2):
    w = torch.tensor(w, dtype=F64)
    n = w.shape[0]
    return Walk(
        w, torch.tensor(Z, dtype=F64), torch.full((n,), u_sample, dtype=F64), torch.full((n, K), u_det, dtype=F64)
    )


def test_walk_coin_accepts_only_strictly_below_the_acceptance_probability():
    """docs/spec.md §7: a coin accepts iff u < a. A uniform equal to a rejects (u <= a
    would accept it: a bias of one tie's mass, which float64 coins hit on designed laws such
    as p = 1/2)."""
    walk = _walk([[0.5, 0.5], [0.5, 0.5]], [1.0, 1.0], u_det=0.5)
    walk.det(torch.tensor([1, 1]), torch.tensor([0, 0]), torch.tensor([True, True]))
    assert walk.moved.tolist() == [False, False]  # u = a = 1/2: rejected
    assert walk.w.tolist() == [[0.0, 0.5]] * 2 and walk.Z.tolist() == [0.5, 0.5]
    walk = _walk([[0.5, 0.5]], [1.0], u_det=0.4999999999999999)
    walk.det(torch.tensor([1]), torch.tensor([0]), torch.tensor([True]))
    assert walk.moved.tolist() == [True] and walk.next.tolist() == [1] and walk.token.tolist() == [0]


def test_walk_stochastic_coin_is_zero_where_r_of_y_is_zero():
    """Step 3's acceptance probability is min(1, w(y) / r(y)) and 0 where r(y) = 0 (as
    ``Walk.stochastic_coin`` documents): even a zero coin rejects then."""
    walk = _walk([[0.25, 0.75]], [1.0], u_sample=0.0)
    rejected = walk.stochastic_coin(
        torch.tensor([True]), torch.tensor([1]), torch.tensor([1]), torch.tensor([0.0], dtype=F64)
    )
    assert rejected.tolist() == [True] and walk.moved.tolist() == [False]
    walk = _walk([[0.25, 0.75]], [1.0], u_sample=0.0)
    rejected = walk.stochastic_coin(
        torch.tensor([True]), torch.tensor([1]), torch.tensor([1]), torch.tensor([0.5], dtype=F64)
    )
    assert rejected.tolist() == [False] and walk.token.tolist() == [1]


def test_walk_recomputes_a_mass_that_rounding_ate_and_keeps_a_tracked_one():
    """``Walk.fix_mass``: where the tracked mass Z came out <= 0 while w still has mass (1 +
    2e-17 rounds to 1, so rejecting the token of weight 1 leaves Z = 0 and w = (0, 1e-17,
    1e-17)), Z is recomputed from w per row; a positive Z is kept as tracked, bit for bit (0.3
    here, where summing w would give 0.30000000000000004). Without the repair the correction
    token's draw u * Z = 0 always picks the first token with mass."""
    walk = _walk([[0.0, 1e-17, 1e-17], [0.1, 0.2, 0.0], [0.0, 0.5, 0.0]], [0.0, 0.3, -1e-18])
    walk.fix_mass()
    assert walk.Z.shape == (3,) and walk.Z.tolist() == [2e-17, 0.3, 0.5]
    # the draw it feeds: u = 3/4 of the repaired mass lands on the last token, not the first
    assert inverse_cdf(walk.w[:1], torch.tensor([0.75], dtype=F64) * walk.Z[:1]).tolist() == [2]


# ---- the workspace is per thread ---------------------------------------------------------------


def test_verify_from_several_threads_equals_verify_from_one():
    """``verify`` keeps its [rows, V] buffers in a thread-local workspace, so serving
    threads can verify at once: each thread's output equals the single-threaded one (a
    workspace shared between threads, or one left uninitialized in a new thread, breaks it)."""
    cfg, model, T, u, tree, logits = _small_tree()
    want = verify(tree, logits, T, cfg, u)
    got: list = []

    def work() -> None:
        for _ in range(5):
            got.append(verify(tree, logits, T, cfg, u))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 15
    for r in got:
        assert torch.equal(r.tokens, want.tokens) and torch.equal(r.lengths, want.lengths)


def test_run_cycle_on_designed_uniforms_matches_build_and_verify():
    """``run_cycle`` is ``build_tree`` then ``verify`` on the same uniforms (docs/spec.md
    §7): the uniforms handed in are checked for this batch and used as given."""
    cfg = FastConfig(K=3, depth=2, budget=5, m=1, draft_top_k=None)
    u = Uniforms.random(2, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(4))
    T = torch.full((2,), 0.8, dtype=F64)
    model = HashTableModel(20, 2, seed=0, dtype=F64)
    tree = build_tree(model.draft_logits, cfg, T, u)
    want = verify(tree, model.target_logits(tree), T, cfg, u)
    tree2, got = run_cycle(HashTableModel(20, 2, seed=0, dtype=F64), cfg, 0.8, uniforms=u)
    assert torch.equal(tree2.tokens, tree.tokens) and torch.equal(got.tokens, want.tokens)


# ---- what build_tree asks the draft model and takes from expand ------------------------------


def test_build_tree_asks_the_draft_model_the_documented_queries():
    """``DraftQuery``'s contract, which a user's draft model reads: layer 0 is the root
    (tokens, parent_rows and slots -1, prefixes [b, 1, 0] int64, valid); the query at layer
    d asks for B depth-d nodes with prefixes [b, B, d] whose last column is the node's
    token and whose head is its parent's prefix (parent_rows indexes the previous query's
    rows, slots < K). A model keyed on these (a KV cache indexed by parent row and slot)
    breaks when one of them is off."""
    cfg = FastConfig(K=3, depth=3, budget=8, m=1, beam=2, draft_top_k=None)
    model = HashTableModel(20, 2, seed=0, dtype=F64)
    T = torch.full((2,), 0.9, dtype=F64)
    u = Uniforms.random(2, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(1))
    queries = []

    def draft(query):
        queries.append(query)
        return model.draft_logits(query)

    tree = build_tree(draft, cfg, T, u)
    assert [q.layer for q in queries] == [0, 1, 2]
    root = queries[0]
    for x in (root.tokens, root.parent_rows, root.slots):
        assert x.dtype == torch.int64 and x.tolist() == [[-1], [-1]]
    assert root.prefixes.dtype == torch.int64 and root.prefixes.shape == (2, 1, 0)
    assert root.valid.dtype == torch.bool and root.valid.tolist() == [[True], [True]]
    for d, (prev, q) in enumerate(zip(queries, queries[1:]), start=1):
        assert q.tokens.shape == q.parent_rows.shape == q.slots.shape == q.valid.shape == (2, cfg.B)
        assert q.prefixes.dtype == torch.int64 and q.prefixes.shape == (2, cfg.B, d)
        assert q.slots.dtype == torch.int64 and q.parent_rows.dtype == torch.int64
        for i in range(2):
            for r in range(cfg.B):
                if not bool(q.valid[i, r]):
                    continue
                p, s = int(q.parent_rows[i, r]), int(q.slots[i, r])
                assert 0 <= p < prev.tokens.shape[1] and 0 <= s < cfg.K
                assert q.prefixes[i, r, :-1].tolist() == prev.prefixes[i, p].tolist()
                assert int(q.prefixes[i, r, -1]) == int(q.tokens[i, r])
                # the node is in the tree, at that slot under that parent
                assert any(
                    path[-1] == s and tok == int(q.tokens[i, r]) and len(path) == d for path, tok, _ in tree.request(i)
                )


@pytest.mark.parametrize("layer", [1, 2])
@pytest.mark.parametrize("cut", ["requests", "nodes", "slots"])
def test_build_tree_checks_each_layers_pools_sizes(layer, cut):
    """A pluggable ``expand_fn`` (``expand_dense`` is one) must hand back pools for every
    request, every expanded node and K slots; ``build_tree`` says which layer's pool is
    wrong (a check with a size left open lets a short pool through to a gather that fails
    far from the cause, or silently reads another request's row)."""
    cfg = FastConfig(K=3, depth=2, budget=5, m=1, beam=2, draft_top_k=None)
    model = HashTableModel(20, 2, seed=0, dtype=F64)
    T = torch.ones(2, dtype=F64)
    u = Uniforms.random(2, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(0))
    calls = []

    def short(*args):
        calls.append(1)
        pool = expand(*args)
        if len(calls) != layer:
            return pool
        fields = {f.name: getattr(pool, f.name) for f in dataclasses.fields(pool)}
        for name, x in fields.items():
            if x is None:
                continue
            if cut == "requests":
                fields[name] = x[1:]
            elif cut == "nodes":
                fields[name] = torch.cat([x, x], 1)
            elif name in ("tokens", "kinds", "ranks", "factors", "ok"):
                fields[name] = x[..., :-1]
        return type(pool)(**fields)

    with pytest.raises(ValueError, match=rf"^build_tree: layer {layer}: pool\.tokens must be a torch\.int64 tensor"):
        build_tree(model.draft_logits, cfg, T, u, expand_fn=short)


# ---- the checks themselves: kinds, "..." sizes, entry names --------------------------------


def test_expect_reads_kinds_and_open_sizes_exactly():
    """``expect``: the "int" kind is an integer dtype (not float, complex or bool); one
    ``...`` stands for any number of dimensions between a fixed head and tail, and both
    ends are checked, as is the least number of dimensions; the message writes ``...``."""
    ints, floats, bools = torch.zeros(2, dtype=torch.int32), torch.zeros(2), torch.zeros(2, dtype=torch.bool)
    assert expect("f", "x", ints, "[n]", (2,), "int") is ints
    for bad in (floats, bools, torch.zeros(2, dtype=torch.complex64)):
        with pytest.raises(ValueError, match="^f: x must be a int tensor"):
            expect("f", "x", bad, "[n]", (2,), "int")
    x = torch.zeros(2, 5, 3)
    assert expect("f", "x", x, "[2, ..., 3]", (2, ..., 3), "float") is x
    assert expect("f", "x", torch.zeros(2, 3), "[2, ..., 3]", (2, ..., 3), "float").shape == (2, 3)
    for bad in (torch.zeros(2, 5, 4), torch.zeros(1, 5, 3), torch.zeros(3), torch.zeros(2)):
        with pytest.raises(
            ValueError, match=r"^f: x must be a float tensor of shape \[2, \.\.\., 3\] = \[2, \.\.\., 3\]"
        ):
            expect("f", "x", bad, "[2, ..., 3]", (2, ..., 3), "float")
    with pytest.raises(ValueError, match=r"= \[\*, \.\.\., \*\]"):
        expect("f", "x", torch.zeros(4), "[b, ..., V]", (None, ..., None), "float")  # one dimension: too few


def test_expect_params_names_the_caller_and_the_proxy_field():
    """``expect_params`` refuses what is not ``Params`` (a TypeError naming the caller) and a
    proxy the fastpath does not compute, as a ``CaseError`` on the field "proxy"."""
    with pytest.raises(TypeError, match=r"^expand: params must be a rheo\.reference\.params\.Params"):
        expect_params("expand", {"K": 3})
    cfg = FastConfig(K=3, depth=2, budget=5, m=1).replace(proxy=Proxy("callable", fn=lambda *a: 0.5))
    with pytest.raises(CaseError) as err:
        expect_params("expand", cfg)
    assert err.value.field == "proxy" and err.value.message.startswith(
        'expand: the fastpath computes the proxies "rheo"'
    )


def test_expand_ranked_topk_and_uniforms_name_each_bad_argument():
    """The remaining checks name their function and argument: ``expand``'s logits, u, T and
    params, ``ranked_topk``'s x and k (a bool or a non-integer k is refused too), and
    ``Uniforms``' own fields."""
    cfg = FastConfig(K=3, depth=2, budget=5, m=1)
    logits, valid, u, T = torch.zeros(2, 1, 5), torch.ones(2, 1, dtype=torch.bool), torch.zeros(2, 1), torch.ones(2)
    for message, args in {
        "expand: logits must be a float tensor of shape [b, n, V]": (logits.long(), valid, u, T),
        "expand: u must be a float tensor of shape [b, n] = [2, 1]": (logits, valid, u[:1], T),
        "expand: T must be a float tensor of shape [b] = [2]": (logits, valid, u, T.long()),
    }.items():
        with pytest.raises(ValueError) as err:
            expand(*args, cfg)
        assert str(err.value).startswith(message), str(err.value)
    with pytest.raises(CaseError) as case_err:
        expand(logits, valid, u, T, cfg.in_arithmetic("exact"))
    assert case_err.value.message.startswith("expand: the fastpath computes in float64")
    with pytest.raises(ValueError, match=r"^ranked_topk: x must be a float tensor of shape \[\.\.\., V\]"):
        ranked_topk(torch.zeros(5, dtype=torch.int64), 2)
    for k in (True, 1.5):
        with pytest.raises(ValueError, match=rf"^ranked_topk: k must be an integer >= 1, got {k!r}"):
            ranked_topk(torch.zeros(5), k)  # type: ignore[arg-type]
    u = Uniforms.random(2, K=3, B=2, D=2)
    assert _contract_refusals(u, lambda x: x, "Uniforms: ", {"u_draw", "u_det", "u_sample"}) == [
        "u_draw",
        "u_sample",
        "u_det",
        "u_final",
    ]


def test_ranked_topk_settles_ties_per_row_and_on_a_wide_vocabulary():
    """``ranked_topk`` settles a tie at the k-th place by lower id, per row: a row without a
    tie next to one with it keeps its own top k (a fix-up applied to the wrong rows would
    overwrite them), and 100 equal values keep ids 0..9 (an unstable sort of the keep mask
    picks others at this width)."""
    x = torch.tensor([[5.0, 1.0, 3.0, 3.0, 0.0], [0.0, 4.0, 3.0, 2.0, 1.0]], dtype=F64)
    vals, ids = ranked_topk(x, 2)
    assert ids.tolist() == [[0, 2], [1, 2]] and vals.tolist() == [[5.0, 3.0], [4.0, 3.0]]
    _, ids = ranked_topk(torch.zeros(3, 100, dtype=F64), 10)
    assert ids.tolist() == [list(range(10))] * 3


def test_tempered_at_temperature_two_everywhere():
    """``tempered`` divides by T whenever T is not 1 everywhere: at T = 2 for every row it is
    softmax(logits / 2), not softmax(logits)."""
    logits = torch.tensor([[0.0, 1.0, 2.0], [2.0, 0.0, -2.0]], dtype=F64)
    got = tempered(logits, torch.full((2,), 2.0, dtype=F64))
    torch.testing.assert_close(got, torch.softmax(logits / 2, -1), rtol=1e-15, atol=0)


def test_padding_rows_follow_the_documented_format():
    """``DraftTree``'s padding rows (past ``num_nodes``: here a budget of 8 over at most 4
    nodes) are what its docstring promises a serving engine: token 0, parent -1, kind -1,
    score 0, prefix all -1, position id 0, no children, an attention row that sees only
    itself, and retrieve rows of -1 after the leaves."""
    cfg = FastConfig(K=2, depth=2, budget=8, m=1, beam=1, draft_top_k=None)
    model = HashTableModel(20, 2, seed=0, dtype=F64)
    T = torch.full((2,), 0.8, dtype=F64)
    tree = build_tree(model.draft_logits, cfg, T, Uniforms.random(2, 2, 1, 2, torch.Generator().manual_seed(0)))
    for i in range(2):
        n = int(tree.num_nodes[i])
        assert n < 8
        pad = slice(n, 8)
        assert tree.tokens[i, pad].eq(0).all() and tree.parents[i, pad].eq(-1).all()
        assert tree.kinds[i, pad].eq(-1).all() and tree.scores[i, pad].eq(0).all()
        assert tree.prefixes[i, n + 1 :].eq(-1).all() and tree.position_ids[i, n + 1 :].eq(0).all()
        assert tree.children[i, n + 1 :].eq(-1).all()
        rows = tree.attention_mask[i, n + 1 :]
        assert torch.equal(rows, torch.eye(9, dtype=torch.bool)[n + 1 :])
        leaves = int((tree.retrieve_indices[i, :, 0] >= 0).sum())
        assert tree.retrieve_indices[i, leaves:].eq(-1).all()


def test_a_depth_one_tree_of_a_float32_model_has_float64_scores():
    """Path scores are float64 whatever the model's dtype (docs/fastpath.md), also when the
    tree is only the root's layer: the root's factors (float32 here) are cast when recorded,
    not only when multiplied by a parent's float64 score."""
    cfg = FastConfig(K=3, depth=1, budget=3, m=1, draft_top_k=None)
    model = HashTableModel(20, 2, seed=0, dtype=torch.float32)
    tree = build_tree(model.draft_logits, cfg, torch.ones(2), Uniforms.random(2, 3, cfg.B, 1))
    assert tree.scores.dtype == F64 and bool((tree.scores[tree.valid] > 0).all())


def test_order_key_puts_the_shallower_node_first_on_an_exact_score_tie():
    """docs/spec.md §3, the order key (score desc, depth asc, slot path asc): with the law
    (1/2, 1/4, 1/4) at every node, the depth-1 nodes of slots 1 and 2 tie exactly with the
    depth-2 node under slot 0 (1/2 * 1/2 = 1/4), and a budget of 3 keeps the depth-1 ones.
    Depth and slot path must not be mixed into one number that lets a small slot code at
    depth 2 overtake a larger one at depth 1."""
    cfg = FastConfig(policy="topk", K=3, depth=2, budget=3, beam=1, draft_top_k=None)

    def draft(query):
        b, n = query.valid.shape
        return torch.tensor([math.log(2.0), 0.0, 0.0], dtype=F64).expand(b, n, 3).clone()

    tree = build_tree(draft, cfg, torch.ones(1, dtype=F64), Uniforms.random(1, 3, 1, 2))
    assert tree.scores.tolist() == [[0.5, 0.25, 0.25]]
    assert [path for path, _, _ in tree.request(0)] == [(0,), (1,), (2,)]


def test_retrieve_indices_list_the_leaves_in_node_order_on_a_wide_tree():
    """``DraftTree.retrieve_indices``: one root-to-leaf path per leaf, leaves in node order,
    then -1 rows. On a tree of 60 nodes with dozens of leaves, an unstable sort of the
    leaf flags (torch's, even on the CPU, at this width) lists them out of order."""
    cfg = FastConfig(K=8, depth=3, budget=60, m=1, beam=4, draft_top_k=None)
    model = HashTableModel(40, 2, seed=3, dtype=F64)
    T = torch.ones(2, dtype=F64)
    tree = build_tree(model.draft_logits, cfg, T, Uniforms.random(2, 8, 4, 3, torch.Generator().manual_seed(0)))
    for i in range(2):
        n = int(tree.num_nodes[i])
        parents = tree.parents[i, :n].tolist()
        leaves = [j for j in range(n) if j not in parents]
        assert len(leaves) > 20
        rows = tree.retrieve_indices[i]
        # each row's last entry that is not -1 is its leaf (root-included index: node j at j + 1)
        got = [int(r[r >= 0][-1]) - 1 for r in rows[: len(leaves)]]
        assert got == leaves
        assert rows[len(leaves) :].eq(-1).all()


def test_pools_walks_and_buffers_are_made_on_their_inputs_device():
    """The tensors the fastpath makes itself (Top-K pools' ranks and kinds, the rheo slots'
    constants, the walk's flags and counters, the verifier's workspace buffers) are made on
    the device of the tensors they come from. The meta device stands in for an accelerator
    (these steps need no values): a ``device=`` dropped or set to None would put them on
    the CPU, where the next operation with the accelerator's tensors fails."""

    def meta(*shape, dtype=F64):
        return torch.zeros(*shape, dtype=dtype, device="meta")

    pool = topk_pool(meta(2, 1, 4, dtype=torch.int64), meta(2, 1, 4), meta(2, 1, 4, dtype=torch.bool), 3)
    assert {getattr(pool, f.name).device.type for f in dataclasses.fields(pool) if f.name != "dense"} == {"meta"}
    cfg = FastConfig(K=3, depth=2, budget=5, m=1)
    slots = rheo_slots(meta(2, 4, dtype=torch.bool), meta(2, dtype=torch.int64), cfg)
    assert {x.device.type for x in slots} == {"meta"}
    walk = Walk(meta(2, 5), meta(2), meta(2), meta(2, 3))
    assert {x.device.type for x in (walk.moved, walk.next, walk.token, walk.j)} == {"meta"}
    assert _workspace.get("edges-test", 2, meta(3, 5)).device.type == "meta"


def test_a_callable_target_is_verified_in_its_own_dtype_not_the_draft_s():
    """The verifier compares its coins and temperatures in the target logits' dtype: a
    bfloat16 draft with float64 target logits gives the same outputs whether the logits come
    as a tensor or from a callable that answers the visited nodes (the callable's dtype is
    known only once it answers; casting to the draft's would temper at T = 0.69921875)."""
    from rheo.testing import HashTableModel

    cfg = FastConfig(K=4, depth=3, budget=8, m=1)
    b = 64
    model = HashTableModel(200, b, seed=3, scale=3.0, draft_noise=0.5, dtype=torch.float64)
    g = torch.Generator().manual_seed(5)
    T = torch.tensor([0.7, 1.3, 0.0, 1.0] * (b // 4), dtype=torch.float64)
    u = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, g)
    tree = build_tree(lambda q: model.draft_logits(q).to(torch.bfloat16), cfg, T, u)
    logits = model.target_logits(tree)
    assert tree.verify_probs.dtype == torch.bfloat16 and logits.dtype == torch.float64
    as_tensor = verify(tree, logits.clone(), T, cfg, u)
    as_callable = verify(tree, lambda rows, nodes: logits[rows, nodes].clone(), T, cfg, u)
    assert torch.equal(as_tensor.tokens, as_callable.tokens)
    assert torch.equal(as_tensor.accepted, as_callable.accepted)
