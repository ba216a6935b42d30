"""The verifier's static-shape walk (``verify(static=True)``: all D+1 depths over all
requests, finished ones masked, no host sync; what a CUDA graph would capture) makes the
same decisions as the default walk, which tests/test_fastpath_differential.py ties to the
reference: same outputs, lengths and accepted nodes on the same tree, logits and uniforms,
bit for bit (each request's row is computed by the same ops either way)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rheo.fastpath import FastConfig, TargetFilters, Uniforms, build_tree, verify  # noqa: E402
from rheo.testing import HashTableModel  # noqa: E402

CASES = [
    dict(K=4, depth=3, budget=8, m=1),
    dict(K=4, depth=3, budget=8, m=0),
    dict(K=5, depth=4, budget=12, m=2, draft_top_k=3),
    dict(K=4, depth=3, budget=8, policy="topk"),
    dict(K=1, depth=2, budget=2, m=0),
    dict(K=3, depth=3, budget=30, m=1),  # more budget than nodes: padding rows
    dict(K=4, depth=3, budget=8, m=1, filters=TargetFilters(top_k=5, top_p=0.9)),
]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_static_walk_equals_the_default_walk(case, dtype, seed):
    cfg = FastConfig(**case)
    b = 16
    model = HashTableModel(50, b, seed=seed, scale=3.0, draft_noise=0.5, dtype=dtype)
    g = torch.Generator().manual_seed(seed)
    T = torch.tensor([0.0, 0.5, 1.0, 1.5] * (b // 4), dtype=torch.float64)[torch.randperm(b, generator=g)]
    if seed == 1:
        T = torch.ones(b, dtype=torch.float64)  # the default walk's T = 1 shortcut
    u = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, g)
    tree = build_tree(model.draft_logits, cfg, T, u)
    logits = model.target_logits(tree)
    want = verify(tree, logits.clone(), T, cfg, u)
    got = verify(tree, logits.clone(), T, cfg, u, static=True)
    assert torch.equal(got.tokens, want.tokens)
    assert torch.equal(got.lengths, want.lengths)
    assert torch.equal(got.accepted, want.accepted)


def test_static_walk_makes_no_host_sync():
    """No op of the static walk needs a value on the host (``rheo.bench.ops.SYNC_OPS``:
    ``.item()``, ``bool(t)``, ``nonzero``), so a CUDA graph can capture it; the default walk
    syncs once per depth."""
    from rheo.bench.ops import OpCounter

    cfg = FastConfig(K=4, depth=3, budget=8, m=1)
    model = HashTableModel(50, 4, seed=0)
    T = torch.tensor([0.0, 0.5, 1.0, 1.5], dtype=torch.float64)
    u = Uniforms.random(4, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(0))
    tree = build_tree(model.draft_logits, cfg, T, u)
    logits = model.target_logits(tree)
    with OpCounter() as c:
        verify(tree, logits, T, cfg, u, static=True)
    assert c.syncs == 0, c.by_name
    with OpCounter() as c:
        verify(tree, logits, T, cfg, u)
    assert c.syncs > 0


# ---- the static build and the captured cycle ------------------------------------------------


def _tie_heavy(model):
    """Draft logits rounded to integers: ties everywhere, at the draft_top_k boundary too."""

    def draft(query):
        return model.draft_logits(query).round()

    return draft


TREE_FIELDS = ("tokens", "parents", "depth", "slots", "kinds", "ranks", "scores", "valid", "num_nodes", "expansions")
TREE_FIELDS += ("attention_mask", "position_ids", "children", "prefixes", "retrieve_indices", "sample_ids")
TREE_FIELDS += ("sample_probs", "verify_probs")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", CASES[:4] + [dict(K=4, depth=3, budget=8, m=1, tie_break="token")], ids=str)
def test_static_build_equals_the_default_build_on_ties(case, dtype, seed):
    """``build_tree(static=True)`` settles a tie at the draft_top_k boundary in every row
    without a host sync (float32: one topk on packed keys; float64: on the whole row); the
    tree is the default build's, field by field."""
    from rheo.bench.ops import OpCounter

    cfg = FastConfig(**{"draft_top_k": 3, **case})
    b = 8
    model = HashTableModel(40, b, seed=seed, scale=2.0, dtype=dtype)
    g = torch.Generator().manual_seed(seed)
    T = torch.tensor([0.0, 0.5, 1.0, 1.5] * (b // 4), dtype=torch.float64)
    u = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, g)
    want = build_tree(_tie_heavy(model), cfg, T, u)
    with OpCounter() as c:
        got = build_tree(_tie_heavy(model), cfg, T, u, static=True)
    assert c.syncs == 0, c.by_name
    for name in TREE_FIELDS:
        assert torch.equal(getattr(got, name), getattr(want, name)), name


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_the_cycle_a_graph_captures_equals_the_default_cycle(case):
    """``CycleGraph`` (off CUDA: ``static_cycle`` run eagerly, the function a CUDA graph
    captures) makes the default path's decisions: the same tree and the same outputs,
    lengths and accepted nodes, on two cycles with other uniforms and temperatures."""
    from rheo.fastpath.graph import CycleGraph

    cfg = FastConfig(**case)
    b = 8
    model = HashTableModel(60, b, seed=3, scale=3.0, draft_noise=0.5, dtype=torch.float64)
    g = torch.Generator().manual_seed(7)
    T = torch.tensor([0.0, 0.5, 1.0, 1.5] * (b // 4), dtype=torch.float64)
    u = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, g)
    cycle = CycleGraph(model.draft_logits, model.target_logits, cfg, T, u)
    assert not cycle.captured
    for _ in range(2):
        tree, result = cycle(T, u)
        want_tree = build_tree(model.draft_logits, cfg, T, u)
        want = verify(want_tree, model.target_logits(want_tree), T, cfg, u)
        for name in ("tokens", "parents", "kinds", "slots", "num_nodes"):
            assert torch.equal(getattr(tree, name), getattr(want_tree, name)), name
        assert torch.equal(result.tokens, want.tokens) and torch.equal(result.accepted, want.accepted)
        assert torch.equal(result.lengths, want.lengths)
        T = T.flip(0)
        u = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, g)


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_the_cycle_a_graph_captures_runs_on_a_device_without_values(case):
    """What a CUDA graph needs of the function it captures, checked without a GPU: the
    cycle ``CycleGraph`` runs (its input copies, ``static_cycle``, the table model's
    forwards) runs on the ``meta`` device, whose tensors have shapes and no values, so any
    host sync (``.item()``, ``bool(t)``, a value-dependent shape) would raise; and once the
    shape's constants are made (the warm-up before a capture) no op takes or makes a tensor
    off the device (a CPU constant or index copied in each cycle). The default cycle syncs,
    and fails there."""
    from rheo.bench.ops import OpCounter
    from rheo.fastpath.graph import CycleGraph

    cfg = FastConfig(**case)
    b, meta = 4, torch.device("meta")
    model = HashTableModel(300, b, seed=0, device=meta)
    T = torch.tensor([0.0, 0.5, 1.0, 1.5], dtype=torch.float64).to(meta)
    u = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(0)).to(device=meta)
    cycle = CycleGraph(model.draft_logits, model.target_logits, cfg, T, u, mode="eager")
    cycle(T, u)  # the warm-up: constants of the shape, made once
    with OpCounter(meta) as c:
        tree, result = cycle(T, u)
    assert c.syncs == 0 and not c.off_device, (c.syncs, c.off_device)
    assert c.total > 100 and result.tokens.device == meta and result.tokens.shape == (b, cfg.depth + 1)
    assert tree.tokens.shape == (b, cfg.budget)
    with pytest.raises((RuntimeError, NotImplementedError), match="meta"):
        verify(tree, model.target_logits(tree), T, cfg, u)


def test_a_replay_reads_the_inputs_each_call_copies_into_the_graph_s_buffers():
    """The replay path of ``CycleGraph`` (CUDA only) on a CPU, with a stand-in for the
    capture (tests/standin_capture.py): each call copies its temperatures and uniforms into the buffers the graph was
    captured on and returns the tensors the replay overwrote, so a cycle on new inputs
    gives the default path's decisions on those inputs (stale buffers would repeat the
    first cycle's)."""
    from rheo.fastpath.graph import CycleGraph, static_cycle

    from .standin_capture import StandInCapture

    cfg = FastConfig(K=4, depth=3, budget=8, m=1)
    b = 8
    model = HashTableModel(60, b, seed=3, scale=3.0, draft_noise=0.5, dtype=torch.float64)
    g = torch.Generator().manual_seed(5)
    T = torch.tensor([0.0, 0.5, 1.0, 1.5] * (b // 4), dtype=torch.float64)
    u = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, g)
    cycle = CycleGraph(model.draft_logits, model.target_logits, cfg, T, u, mode="eager")

    def fn():
        return static_cycle(model.draft_logits, model.target_logits, cfg, cycle.T, cycle.uniforms)

    capture = StandInCapture()
    cycle._graph = capture(fn)  # what __init__ keeps in mode "graph"
    assert cycle.captured
    outputs = []
    for _ in range(3):
        tree, result = cycle(T, u)
        want_tree = build_tree(model.draft_logits, cfg, T, u)
        want = verify(want_tree, model.target_logits(want_tree), T, cfg, u)
        assert torch.equal(tree.tokens, want_tree.tokens) and torch.equal(result.tokens, want.tokens)
        assert torch.equal(result.lengths, want.lengths)
        outputs.append(result.tokens.clone())
        T = T.flip(0).contiguous()
        u = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, g)
    assert not all(torch.equal(outputs[0], o) for o in outputs[1:])  # new inputs, new outputs
    assert capture.graphs[0].replays == 3  # each cycle a replay, not the eager path


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_tie_test_meets_a_tie_at_the_boundary(dtype):
    """The tie test above is not vacuous: its rounded logits tie at the draft_top_k boundary."""
    from rheo.fastpath import DraftQuery

    model = HashTableModel(40, 8, seed=0, scale=2.0, dtype=dtype)
    b = 8
    q = DraftQuery(
        0,
        torch.full((b, 1), -1),
        torch.zeros((b, 1, 0), dtype=torch.int64),
        torch.full((b, 1), -1),
        torch.full((b, 1), -1),
        torch.ones((b, 1), dtype=torch.bool),
    )
    top = _tie_heavy(model)(q).sort(-1, descending=True).values[..., :4]
    assert bool((top[..., 2] == top[..., 3]).any())  # the 3rd and 4th logits tie in some row


def test_the_static_cycle_refuses_the_stepwise_verifiers_by_name():
    """The wrong-on-purpose verifiers walk one step at a time with host syncs: static=True
    and CycleGraph say so and name the settings, not a capture traceback."""
    from rheo.fastpath.graph import CycleGraph

    cfg = FastConfig(K=3, depth=2, budget=4, m=1).replace(verify="sample_last")
    model = HashTableModel(20, 2, seed=0)
    T = torch.ones(2, dtype=torch.float64)
    u = Uniforms.random(2, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match='CycleGraph: static=True .* got verify="sample_last"'):
        CycleGraph(model.draft_logits, model.target_logits, cfg, T, u)
    tree = build_tree(model.draft_logits, cfg, T, u)
    with pytest.raises(ValueError, match='verify: static=True .* draft_law="sampled": use static=False'):
        verify(tree, model.target_logits(tree), T, cfg, u, static=True)


def test_cycle_graph_names_a_mode_it_cannot_run():
    from rheo.fastpath.graph import CycleGraph

    cfg = FastConfig(K=3, depth=2, budget=4, m=1)
    model = HashTableModel(20, 2, seed=0)
    T = torch.ones(2, dtype=torch.float64)
    u = Uniforms.random(2, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="mode 'graph' captures a CUDA graph and needs CUDA tensors"):
        CycleGraph(model.draft_logits, model.target_logits, cfg, T, u, mode="graph")
    with pytest.raises(ValueError, match="mode must be one of auto, eager, graph, compile, got 'fast'"):
        CycleGraph(model.draft_logits, model.target_logits, cfg, T, u, mode="fast")
    cycle = CycleGraph(model.draft_logits, model.target_logits, cfg, T, u)
    with pytest.raises(ValueError, match=r"CycleGraph: T"):
        cycle(torch.ones(3, dtype=torch.float64), u)


@pytest.mark.parametrize(
    "case",
    [
        dict(K=4, depth=3, budget=8, m=1),
        # the Top-K case compiles as long again: in CI's extended step (-m extended)
        pytest.param(dict(K=4, depth=3, budget=8, policy="topk"), marks=pytest.mark.extended),
    ],
    ids=str,
)
def test_a_compiled_cycle_equals_the_eager_cycle(case):
    """``CycleGraph(mode="compile")``: ``torch.compile`` (inductor, fullgraph) of the whole
    static cycle, the table model's forwards included, fuses it into a few dozen kernels;
    its trees and outputs equal the default eager path's decision by decision on three
    cycles with other temperatures and uniforms (no recompilation between them); path
    scores and laws agree to float32 rounding (inductor's fused softmax rounds its own way,
    so a decision within rounding of its threshold could differ, as between any two
    float32 implementations; none does here). About a minute per case on a 2-core CPU,
    most of it compiling."""
    from rheo.fastpath.graph import CycleGraph

    cfg = FastConfig(**case)
    b = 8
    model = HashTableModel(300, b, seed=5, scale=3.0, draft_noise=0.5)
    g = torch.Generator().manual_seed(11)
    T = torch.tensor([0.0, 0.5, 1.0, 1.5] * (b // 4), dtype=torch.float64)
    u = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, g)
    cycle = CycleGraph(model.draft_logits, model.target_logits, cfg, T, u, mode="compile")
    for _ in range(3):
        tree, result = cycle(T, u)
        want_tree = build_tree(model.draft_logits, cfg, T, u)
        want = verify(want_tree, model.target_logits(want_tree), T, cfg, u)
        for name in TREE_FIELDS:
            got, expected = getattr(tree, name), getattr(want_tree, name)
            if got.is_floating_point():  # inductor's fused softmax rounds its own way: laws and scores agree
                torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-7, msg=name)
            else:  # every decision is the same
                assert torch.equal(got, expected), name
        assert torch.equal(result.tokens, want.tokens) and torch.equal(result.accepted, want.accepted)
        assert torch.equal(result.lengths, want.lengths)
        T = T.flip(0).contiguous()
        u = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, g)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_a_captured_cycle_replays_the_eager_decisions_on_cuda():
    """On CUDA ``CycleGraph`` captures one ``torch.cuda.CUDAGraph``; each replay on new
    temperatures and uniforms (copied into its buffers), from the root the model's in-place
    ``advance`` moved it to, equals the default eager cycle on the same inputs, decision by
    decision, while a second graph at another batch size replays between them."""
    from rheo.fastpath.graph import CycleGraph

    cfg = FastConfig(K=10, depth=8, budget=60, m=1, draft_top_k=128)
    b, dev = 4, torch.device("cuda")
    model = HashTableModel(32000, b, seed=1, scale=6.0, draft_noise=0.3, device=dev)
    g = torch.Generator(device=dev).manual_seed(0)
    T = torch.tensor([1.0, 0.7, 0.0, 1.3], dtype=torch.float64, device=dev)
    u = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, g, device=dev)
    cycle = CycleGraph(model.draft_logits, model.target_logits, cfg, T, u)
    assert cycle.captured
    # a second graph at a larger batch (its own model): the first one's buffers stay valid
    big = HashTableModel(32000, 2 * b, seed=2, scale=6.0, draft_noise=0.3, device=dev)
    T2 = T.repeat(2)
    u2 = Uniforms.random(2 * b, cfg.K, cfg.B, cfg.depth, g, device=dev)
    other = CycleGraph(big.draft_logits, big.target_logits, cfg, T2, u2)
    for _ in range(3):
        context = model.context.clone()
        tree, result = cycle(T, u)
        tree_tokens, out = tree.tokens.clone(), result.tokens.clone()  # the next replay overwrites them
        accepted = result.accepted.clone()
        other(T2, u2)
        model.context.copy_(context)  # the eager cycle from the same root
        want_tree = build_tree(model.draft_logits, cfg, T, u)
        want = verify(want_tree, model.target_logits(want_tree), T, cfg, u)
        assert torch.equal(tree_tokens, want_tree.tokens)
        assert torch.equal(out, want.tokens) and torch.equal(accepted, want.accepted)
        model.advance(want_tree, want)  # in place: the next replay starts from the new root
        T = T.flip(0).contiguous()
        u = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, g, device=dev)
