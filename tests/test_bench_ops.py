"""``rheo.bench.ops``: the op counter behind ``rheo bench fastpath``'s op counts."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rheo.bench.ops import OpCounter, count_ops, op_breakdown  # noqa: E402


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
