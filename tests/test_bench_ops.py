"""``rheo.bench.ops``: the op counter behind ``rheo bench fastpath``'s op counts."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rheo.bench.ops import OpCounter, count_launches, count_ops, op_breakdown  # noqa: E402


def test_a_known_function_has_a_known_count():
    x = torch.ones(3)
    assert count_ops(lambda: x + 1) == 1
    assert count_ops(lambda: torch.softmax(x, -1).sum()) == 2
    assert op_breakdown(lambda: (x * 2).exp()) == {"aten.mul.Tensor": 1, "aten.exp.default": 1}


@pytest.mark.parametrize("n", [0, 1, 7, 50])
def test_a_loop_of_n_ops_counts_n(n):
    x = torch.zeros(4)

    def loop():
        y = x
        for _ in range(n):
            y = y.add(1)
        return y

    assert count_ops(loop) == n


def test_views_syncs_and_pauses_are_counted_apart():
    x = torch.arange(6.0)
    with OpCounter() as c:
        v = x.view(2, 3)  # a view: no kernel
        s = v.sum()
        bool(s > 0)  # a host sync
        with c.paused():
            x.mul(2)  # not counted
    assert c.views == 1 and c.syncs == 1
    assert c.total == 4 and c.kernels == 3  # view, sum, gt, _local_scalar_dense
    assert c.summary()["total"] == 4 and "aten.mul.Tensor" not in c.by_name


def test_ops_that_touch_another_device_are_counted_by_name():
    """With a ``device``, an op with a tensor argument or result elsewhere is counted (a
    CPU index into a meta tensor, a CPU constant made in passing); ops on the device are
    not; without one nothing is."""
    x = torch.zeros(5, device="meta")
    with OpCounter("meta") as c:
        x + 1
        torch.where(x > 0, x, 0.0)
        x.sum()
    assert not c.off_device and c.summary()["off_device"] == 0
    with OpCounter("meta") as c:
        x[torch.tensor([1, 2])]  # the index is a CPU tensor
        torch.arange(3)  # made on the CPU
    assert c.off_device["aten.index.Tensor"] == 1 and c.off_device["aten.arange.default"] == 1
    assert c.summary()["off_device"] == sum(c.off_device.values())
    with OpCounter() as c:
        x[torch.tensor([1, 2])]
    assert not c.off_device and "off_device" not in c.summary()


def test_a_fastpath_cycle_dispatches_a_positive_and_repeatable_count():
    from rheo.fastpath import FastConfig, Uniforms, build_tree, verify
    from rheo.testing import HashTableModel

    cfg = FastConfig(K=4, depth=3, budget=8, m=1)
    T = torch.ones(2, dtype=torch.float64)
    u = Uniforms.random(2, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(0))

    def cycle():
        model = HashTableModel(50, 2, seed=0)
        tree = build_tree(model.draft_logits, cfg, T, u)
        verify(tree, model.target_logits(tree), T, cfg, u)

    cycle()  # constants made once per shape
    first = count_ops(cycle)
    assert first > 0 and count_ops(cycle) == first


def test_launches_count_kernels_once_and_no_views():
    """``count_launches`` (the profiler's events): an op counted once even where it calls
    others (``_to_copy`` runs ``copy_``), views and allocations not at all (``to``, whose
    schema may alias, counts as what it calls)."""
    x = torch.arange(6.0)
    got = count_launches(lambda: x.view(2, 3)[0].to(torch.float64).exp())
    assert got["launches"] == 2 and got["top"] == {"aten::_to_copy": 1, "aten::exp": 1} and got["fused"] == 0


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # inductor's compile warns of torch's own
def test_a_compiled_function_s_fused_kernels_are_counted():
    """Inductor's kernels are seen when compiled with ``cpp.enable_kernel_profile`` (what
    ``rheo bench fastpath`` does): three elementwise ops fuse into one kernel."""
    import torch._inductor.config as inductor_config

    fn = torch.compile(lambda x: ((x * 2).exp() + 1).sum(), fullgraph=True)
    x = torch.arange(8.0)
    saved = inductor_config.cpp.enable_kernel_profile, inductor_config.fx_graph_cache
    inductor_config.cpp.enable_kernel_profile, inductor_config.fx_graph_cache = True, False
    try:
        fn(x)
    finally:
        inductor_config.cpp.enable_kernel_profile, inductor_config.fx_graph_cache = saved
    got = count_launches(lambda: fn(x))
    assert got["fused"] >= 1 and got["launches"] < count_launches(lambda: ((x * 2).exp() + 1).sum())["launches"]


def test_the_bench_s_captured_cycle_counts_and_matches_eager():
    """``rheo.bench.captured.captured_cycles`` on a CPU: the whole cycle compiled, its
    outputs equal to the eager cycle's, its launches counted with the fused kernels and
    fewer than the eager cycle's; ``render_op_counts`` prints them."""
    from rheo.bench.captured import captured_cycles
    from rheo.bench.fastpath import op_counts, render_op_counts
    from rheo.fastpath import FastConfig

    cfg = FastConfig(K=4, depth=3, budget=8, m=1, draft_top_k=16)
    got = captured_cycles(512, 1, cfg, "cpu", repeats=1)
    eager = op_counts(512, 1, cfg)
    assert got["mode"] == "compile" and got["rheo_over_topk"] > 0
    for name in ("rheo", "topk"):
        assert got[name]["equals_eager"] and got[name]["cycle_s"] >= 0
        assert got[name]["launch_top"]["inductor kernel"] >= 1
        assert 0 < got[name]["launches"] < eager[name]["launches"]
    ops = {"batch": 1, "after": eager, "compiled": {k: {"launches": got[k]["launches"]} for k in ("rheo", "topk")}}
    text = "\n".join(render_op_counts(ops))
    assert f"rheo  compiled {got['rheo']['launches']:>5} launches" in text


def _mode_row(mode, rheo_s, equal=True):
    policy = {"cycle_s": rheo_s, "cycle_with_forwards_s": rheo_s + 1e-4, "forwards_s": 1e-4, "equals_eager": equal}
    topk = {**policy, "cycle_s": rheo_s / 1.02}
    return {"mode": mode, "batch": 1, "rheo": policy, "topk": topk, "rheo_over_topk": 1.02}


def test_the_faster_mode_equal_to_eager_sets_a_batch_size_s_figures():
    """On CUDA the bench times the cycle as a CUDA graph and compiled whole; ``fastest``
    takes the faster one whose outputs equal the eager cycle's, keeps the others as
    ``alternatives``, and never lets a failed or unequal mode set the figures."""
    from rheo.bench.captured import attempt, describe_captured, fastest

    graph, compiled = _mode_row("graph", 2e-3), _mode_row("compile", 5e-4)
    best = fastest([graph, compiled])
    assert best["mode"] == "compile" and best["alternatives"] == [graph]
    assert fastest([graph, _mode_row("compile", 1e-4, equal=False)])["mode"] == "graph"  # unequal: not chosen
    failed = attempt(lambda: 1 / 0, "compile", 64)
    assert failed == {"mode": "compile", "batch": 64, "error": "ZeroDivisionError: division by zero"}
    assert fastest([graph, failed]) == {**graph, "alternatives": [failed]}
    slow, fast = _mode_row("graph", 2e-3, equal=False), _mode_row("compile", 1e-3, equal=False)
    neither = fastest([slow, fast])  # none equal: the first, not the faster, and it says so
    assert neither["mode"] == "graph" and not neither["rheo"]["equals_eager"]
    assert describe_captured(compiled).startswith("the cycle compiled whole (torch.compile): rheo 0.50 ms")
    assert describe_captured(failed).endswith("(torch.compile): failed, ZeroDivisionError: division by zero")
    no_ratio = {**graph, "rheo_over_topk": None, "topk": {**graph["topk"], "cuda_graphs": False}}
    line = describe_captured(no_ratio)
    assert "(x-;" in line and line.endswith("; inductor skipped its CUDA graphs)")


def test_the_captured_figures_cover_every_mode_timed():
    """``captured_figures``: times and the worst Rheo/Top-K ratio from the rows that set
    them; ``captured_equals_eager`` false when any mode timed, the one not chosen included,
    differs from the eager cycle (failed modes aside)."""
    from rheo.bench.captured import attempt, captured_figures, fastest

    b1 = fastest([_mode_row("graph", 2e-3), _mode_row("compile", 5e-4)])
    b64 = fastest([_mode_row("graph", 3e-3), attempt(lambda: 1 / 0, "compile", 64)])
    got = captured_figures({"1": b1, "64": {**b64, "rheo_over_topk": 1.3}})
    assert got == {
        "rheo_captured_cycle_ms_b1": 0.5,
        "rheo_captured_cycle_ms_b64": 3.0,
        "rheo_over_topk_captured": 1.3,
        "captured_equals_eager": True,
    }
    b1_graph_differs = fastest([_mode_row("graph", 2e-3, equal=False), _mode_row("compile", 5e-4)])
    assert b1_graph_differs["mode"] == "compile"
    assert captured_figures({"1": b1_graph_differs})["captured_equals_eager"] is False
    assert captured_figures({"1": {**b1, "rheo_over_topk": None}})["rheo_over_topk_captured"] is None


def test_the_cuda_graph_build_and_verify_timings_run_their_course_on_a_cpu(monkeypatch):
    """``captured_builds`` and ``captured_verify`` (CUDA only in ``rheo bench fastpath``) with
    ``capture`` replaced by a CPU stand-in that runs the function again on each replay: the
    static sparse and dense builds and the static verifier run, the ratios are formed, and
    the replayed verifier's outputs equal the default walk's; the CLI prints both lines."""
    import rheo.bench.captured as bc
    from rheo.bench.runner import TableRunner
    from rheo.cli.bench import render_fastpath
    from rheo.fastpath import FastConfig, build_tree, verify

    from .standin_capture import StandInCapture

    capture = StandInCapture()
    monkeypatch.setattr(bc, "capture", capture)
    dense_calls = []

    def dense(*args, **kwargs):
        dense_calls.append(kwargs)
        return expand_dense(*args, **kwargs)

    expand_dense = bc.expand_dense
    monkeypatch.setattr(bc, "expand_dense", dense)
    cfg = FastConfig(K=4, depth=3, budget=8, m=1, draft_top_k=16)
    r = TableRunner(512, 2, "cpu")
    u = r.uniforms(cfg, seed=3)
    builds = bc.captured_builds(r, cfg, u, repeats=1)
    assert builds["sparse_build_captured_s"] > 0 and builds["dense_build_captured_s"] > 0
    assert 0 < builds["sparse_over_dense_captured"] and "captured_error" not in builds
    # the two builds captured (off CUDA the forwards run eagerly), each replayed 5 times; only
    # the dense build expands by expand_dense, sync-free, with a Gumbel draw
    assert [g.replays for g in capture.graphs] == [5, 5]
    assert dense_calls and all(c == {"method": "gumbel", "static": True} for c in dense_calls)
    assert len(dense_calls) == 6 * cfg.depth  # the capture's call and 5 replays, a layer each
    r.model.context = r.context.clone()
    tree = build_tree(r.model.draft_logits, cfg, r.T, u)
    logits = r.model.target_logits(tree)
    want = verify(tree, logits, r.T, cfg, u)
    ver = bc.captured_verify(tree, logits, r.T, cfg, u, want, repeats=1)
    assert ver["captured_outputs_equal"] is True and ver["fast_captured_s"] > 0
    differs = verify(tree, logits, r.T, cfg, TableRunner(512, 2, "cpu").uniforms(cfg, seed=4))
    assert not torch.equal(differs.tokens, want.tokens)  # other uniforms, other outputs: the check can fail
    assert bc.captured_verify(tree, logits, r.T, cfg, u, differs, repeats=1)["captured_outputs_equal"] is False
    row = {"rheo_cycle_s": 0.02, "topk_cycle_s": 0.017, "sparse_build_s": 0.017, "dense_build_s": 0.076}
    row.update(rheo_over_topk=1.18, sparse_over_dense=0.22, **builds)
    verify_row = {"batch": 2, "fast_s": 0.01, "naive_s": 0.2, "fast_over_naive_verify": 20.0, **ver}
    verify_row.update(outputs_equal_float64=True, mean_output_length=3.0, fast_over_naive_verify_captured=40.0)
    out = dict(device="cuda", torch_threads=1, vocab=512, K=4, depth=3, budget=8, m=1, draft_top_k=16)
    out.update(batches={"2": row}, verify=verify_row, target_verdicts=[], device_kind="cuda")
    text = render_fastpath(out)
    assert "batch 2, tree builds as CUDA graphs: sparse" in text and "[gumbel] (x" in text
    assert "verify at batch 2 as a CUDA graph:" in text and "naive loop over it x40.0" in text


def test_the_bench_wires_the_cuda_graph_forms_into_its_figures_and_exit_status(monkeypatch):
    """``bench_fastpath(graphs=True)`` (what a CUDA run does) on a CPU with the stand-in
    capture: every batch size's builds and the verifier are timed as graphs, the worst
    batch's ratio and the verifier's reach the top level, and nothing is a finding. A
    failed capture, a replay that differs, or a mode that failed to compile is one
    (``findings``), and any finding makes the exit status 1."""
    import rheo.bench.captured as bc
    import rheo.bench.fastpath as bf
    from rheo.cli.bench import fastpath_status, render_fastpath
    from rheo.fastpath import FastConfig

    from .standin_capture import StandInCapture

    monkeypatch.setattr(bc, "capture", StandInCapture())
    monkeypatch.setattr(bf, "MIN_SECONDS", 0.0)  # one timed run of each, not a second's worth
    cfg = FastConfig(K=4, depth=3, budget=8, m=1, draft_top_k=16)
    out = bf.bench_fastpath(
        batches=(1, 2), vocab=512, params=cfg, repeats=1, naive_batch=2, compiled=False, graphs=True
    )
    rows = out["batches"].values()
    assert out["sparse_over_dense_captured"] == max(r["sparse_over_dense_captured"] for r in rows)
    v = out["verify"]
    assert v["captured_outputs_equal"] and out["fast_over_naive_verify_captured"] == v["naive_s"] / v["fast_captured_s"]
    assert out["capture_findings"] == []
    assert "tree builds as CUDA graphs" in render_fastpath(out)

    failed = {**out, "batches": {"1": {**out["batches"]["1"], "captured_error": "RuntimeError: boom"}}}
    assert bc.findings(failed) == ["batch 1: the tree builds as CUDA graphs: RuntimeError: boom"]
    differs = {**out, "verify": {**v, "captured_outputs_equal": False}}
    assert bc.findings(differs) == ["the verifier as a CUDA graph differs from the default walk"]
    graph_row = {"mode": "graph", "rheo": {"equals_eager": False}, "topk": {"equals_eager": True}}
    broken = {"mode": "compile", "error": "BackendCompilerFailed: no"}
    modes = {**out, "captured": {"64": {**graph_row, "alternatives": [broken]}}}
    assert bc.findings(modes) == [
        "batch 64: the cycle in mode graph differs from the eager cycle",
        "batch 64: the cycle in mode compile failed: BackendCompilerFailed: no",
    ]
    for bad in (failed, differs, modes):
        assert fastpath_status({**bad, "capture_findings": bc.findings(bad)}) == 1
    assert "  FINDING: the verifier as a CUDA graph differs" in render_fastpath(
        {**differs, "capture_findings": bc.findings(differs)}
    )
