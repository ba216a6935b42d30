"""Decision equality: the fastpath (float64) against the reference simulator on the same
uniforms (SPEC 7), on Hypothesis-generated small instances (every policy, m, budget,
temperature, filter, sparse on/off, and the wrong-on-purpose variants), and on designed
exact ties.

See ``rheo.differential`` for what "equal" means and why requests with a decision within
1e-9 of its threshold are set aside (they are counted, and must stay rare).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, note

torch = pytest.importorskip("torch")

from rheo.differential import check_example, compare_batch, fast_examples  # noqa: E402
from rheo.fastpath import (  # noqa: E402
    FastConfig, HashTableModel, PrefixTableModel, TargetFilters, Uniforms, build_tree,
)

from .devices import DEVICES  # noqa: E402


def run_batch(model, cfg, temps, seed, device="cpu"):
    """The fastpath on one batch and the reference on each request; returns the checks."""
    return compare_batch(model, cfg, temps, np.random.default_rng(seed), device)[0]


@pytest.mark.parametrize("device", DEVICES)
@given(example=fast_examples())
def test_fastpath_decisions_equal_reference(device, example):
    checks = check_example(example, device)
    note(f"{example} device={device}")
    for i, c in enumerate(checks):
        event(c.status)
        assert c.status != "differs", f"request {i} (T={example['temps'][i]}): {c.detail}"


def test_near_threshold_requests_are_rare():
    """The margin rule must not hide the comparison: over 300 random requests, at most 2%
    are set aside as near a threshold."""
    statuses = []
    rng = np.random.default_rng(7)
    for k in range(100):
        K = int(rng.integers(1, 5))
        cfg = FastConfig(K=K, depth=int(rng.integers(1, 4)), budget=int(rng.integers(1, 3 * K + 1)),
                         m=int(rng.integers(0, K)), draft_top_k=None).validate()
        model = HashTableModel(int(rng.integers(2, 7)), 3, seed=k, rows=4096, dtype=torch.float64)
        statuses += [c.status for c in run_batch(model, cfg, [0.5, 1.0, 0.0], k)]
    print(f"near-threshold census: {statuses.count('equal')} equal, {statuses.count('near')} set aside "
          f"of {len(statuses)}")
    assert "differs" not in statuses
    assert statuses.count("near") <= 6, statuses.count("near")


# ---- designed exact ties (values exactly representable, so both engines see the tie) ----

def _uniform_model(V, batch, target=None):
    flat = [0.0] * V
    return PrefixTableModel(V, batch, lambda i, pre: target(i, pre) if target else [float(t % 3) for t in range(V)],
                            lambda i, pre: flat)


@pytest.mark.parametrize("tie_break", ["slot", "token"])
@pytest.mark.parametrize("m", [0, 1, 2])
def test_exact_score_ties_follow_the_order_key(tie_break, m):
    """A uniform draft law at every node: every node of a layer has the same score, so the
    beam and the pruning are decided by the tie-break alone (slot path, or token path for
    the control). The fastpath matches the reference on every draw."""
    cfg = FastConfig(K=3, depth=3, budget=7, m=m, beam=2, tie_break=tie_break, draft_top_k=None).validate()
    model = _uniform_model(5, 4)
    for seed in range(40):
        checks = run_batch(model, cfg, [1.0, 0.5, 0.0, 1.5], seed)
        assert all(c.status == "equal" for c in checks), [c.detail for c in checks]


def test_exact_ties_at_the_draft_top_k_boundary():
    """Draft logits (2, 1, 1, 1, 0, 1): keeping 3 must take ids 0, 1, 2 (ties -> lower id)."""
    V = 6
    model = PrefixTableModel(V, 2, lambda i, pre: [0.5, 0.1, 0.3, 0.2, 0.0, 0.4],
                             lambda i, pre: [2.0, 1.0, 1.0, 1.0, 0.0, 1.0])
    for m, policy in ((0, "rheo"), (1, "rheo"), (0, "topk")):
        cfg = FastConfig(K=3, depth=2, budget=12, m=m, policy=policy, draft_top_k=3).validate()
        for seed in range(20):
            checks = run_batch(model, cfg, [1.0, 0.0], seed)
            assert all(c.status == "equal" for c in checks), [c.detail for c in checks]
        T = torch.tensor([1.0, 1.0], dtype=torch.float64)
        tree = build_tree(model.draft_logits, cfg, T, Uniforms.random(2, 3, 3, 2, torch.Generator().manual_seed(0)))
        assert set(tree.tokens[0, tree.depth[0] == 1].tolist()) == {0, 1, 2}


def test_exact_depth_ties_prefer_the_shallower_node():
    """A one-hot draft law (factor exactly 1): a child scores exactly its parent's score and
    must come after it; the budget cuts between them."""
    V = 4
    model = PrefixTableModel(V, 2, lambda i, pre: [0.3, 0.1, 0.2, 0.0],
                             lambda i, pre: [0.0, float("-inf"), float("-inf"), float("-inf")] if len(pre) % 2
                             else [1.0, 0.0, 0.5, -1.0])
    for budget in range(1, 9):
        cfg = FastConfig(K=2, depth=3, budget=budget, m=1, draft_top_k=None).validate()
        for seed in range(10):
            checks = run_batch(model, cfg, [1.0, 0.5], seed)
            assert all(c.status == "equal" for c in checks), [c.detail for c in checks]


def test_exact_target_ties_greedy_and_top_k():
    """Target logits with ties: T = 0 takes the lowest id among the argmax; target_top_k
    keeps the lower ids at the boundary."""
    V = 5
    model = PrefixTableModel(V, 2, lambda i, pre: [1.0, 2.0, 2.0, 0.0, 2.0], lambda i, pre: [0.5, 0.0, 1.0, 0.2, 0.1])
    for top_k in (None, 1, 2):
        cfg = FastConfig(K=2, depth=2, budget=4, m=1, draft_top_k=None, filters=TargetFilters(top_k=top_k)).validate()
        for seed in range(20):
            checks = run_batch(model, cfg, [0.0, 1.0], seed)
            assert all(c.status == "equal" for c in checks), [c.detail for c in checks]
