"""Decision equality: the fastpath (float64) against the reference simulator on the same
uniforms (docs/spec.md §7), on Hypothesis-generated small instances (every policy, m, budget,
temperature, filter, sparse on/off, and the wrong-on-purpose variants), and on designed
exact ties.

See ``rheo.checks.differential`` for what "equal" means and why requests with a decision within
1e-9 of its threshold are set aside (they are counted, and must stay rare).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, note

torch = pytest.importorskip("torch")

from rheo.checks.differential.fastpath import (  # noqa: E402
    check_designed_ties,
    compare_batch,
    designed_ties,
    fast_examples,
    float32_near_tie,
    run_example,
)
from rheo.fastpath import (  # noqa: E402
    FastConfig,
    TargetFilters,
    Uniforms,
    build_tree,
)
from rheo.testing import (  # noqa: E402
    HashTableModel,
    PrefixTableModel,
)
from rheo.testing.ranges import assert_in_range  # noqa: E402

from .devices import DEVICES  # noqa: E402


def run_batch(model, cfg, temps, seed, device="cpu"):
    """The fastpath on one batch and the reference on each request; returns the checks."""
    return compare_batch(model, cfg, temps, np.random.default_rng(seed), device)[0]


@pytest.mark.parametrize("device", DEVICES)
@given(example=fast_examples())
def test_fastpath_decisions_equal_reference(device, example):
    checks, tree, result = run_example(example, device)
    note(f"{example} device={device}")
    for i, c in enumerate(checks):
        event(c.status)
        assert c.status != "differs", f"request {i} (T={example['temps'][i]}): {c.detail}"
    V, cfg = example["case"]
    assert_in_range(tree, result, cfg, V)  # the value ranges the fastpath never checks at run time


def _assert_decides_as_reference(batches, cfg, V):
    """Each (label, (checks, tree, result)) batch of ``batches``: no request differs from the
    reference's decision on the same uniforms, and the tree and result are in range (the
    value ranges the fastpath never checks at run time); returns every request's status."""
    statuses = []
    for label, (checks, tree, result) in batches:
        bad = [f"{label} request {i}: {c.detail}" for i, c in enumerate(checks) if c.status == "differs"]
        assert not bad, bad[:3]
        assert_in_range(tree, result, cfg, V)
        statuses += [c.status for c in checks]
    return statuses


def _decides_as_reference(model, cfg, temps, seeds):
    """Each seed's batch of ``model`` through the fastpath and the reference (``compare_batch``),
    checked by ``_assert_decides_as_reference``; returns the statuses."""
    batches = ((f"seed {s}", compare_batch(model, cfg, temps, np.random.default_rng(s))) for s in seeds)
    return _assert_decides_as_reference(batches, cfg, model.vocab_size)


VARIANTS = {
    "proxy self": dict(proxy="self"),
    "constant proxy 0.25": dict(proxy=0.25),
    "verify sample_last": dict(verify="sample_last"),
    "verify class_law": dict(verify="class_law"),
    "draft_law dense": dict(draft_law="dense"),
    "draft_law untempered": dict(draft_law="untempered"),
    "tie_break token": dict(tie_break="token"),
    "epsilon 0.05, m = 0": dict(epsilon=0.05, m=0),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_each_wrong_on_purpose_variant_decides_as_the_reference_variant(variant):
    """The negative controls need the fastpath's variants (``rheo.fastpath.variants``) to be
    the reference's, decision by decision: each variant alone, on fixed seeds, temperatures
    from 0 to 1.5, zero-probability tokens and target filters, every request "equal" (the
    random examples above reach each variant in only a few of their examples)."""
    kw = dict(K=3, depth=3, budget=8, m=1, beam=2, draft_top_k=4, filters=TargetFilters(top_p=0.9))
    cfg = FastConfig(**{**kw, **VARIANTS[variant]})

    def example(seed):
        return {"case": (6, cfg), "seed": seed, "noise": 1.0, "zeros": 0.3 * (seed % 2), "temps": [0.0, 0.5, 1.0, 1.5]}

    statuses = _assert_decides_as_reference(((f"seed {s}", run_example(example(s))) for s in range(6)), cfg, 6)
    assert statuses.count("equal") >= 0.9 * len(statuses), statuses


# ---- the wrong-on-purpose variants against the reference's -------------------------------

# Truncation to draft_top_k = K = 3 of V = 6 tokens leaves U two tokens while the dense law
# spreads over five, and temperatures 0.5..2 make the tempered, untempered and dense laws
# far apart: the check law moves the stochastic coin on most requests.
_STRONG = dict(K=3, depth=2, budget=6, m=1, beam=2, draft_top_k=3)
STRONG_VARIANTS = {
    "draft_law dense": dict(draft_law="dense"),
    "draft_law untempered": dict(draft_law="untempered"),
    "class_law + dense": dict(draft_law="dense", verify="class_law"),
    "sample_last + dense": dict(draft_law="dense", verify="sample_last"),
    "class_law, every fill kept (W = K)": dict(verify="class_law"),
}


@pytest.mark.parametrize("variant", sorted(STRONG_VARIANTS))
def test_variant_check_laws_decide_as_the_reference_variant(variant):
    """docs/spec.md §4, the verifiers that exist to be shown lossy: each variant's stochastic
    step uses the law the spec names (dense: the untruncated tempered law; untempered: r from
    the untempered q; class_law: r' with the band's mass on x*, also rewritten in the dense
    law when combined with ``draft_law: "dense"``; sample_last: the dense law after the
    deterministic steps). On a draft law truncated to K tokens, where those laws are far
    apart, the fastpath must decide as the reference's variant on every request. Catches a
    variant that checks against the wrong law (the sampled r instead of the dense one, the
    dense law for "untempered", the sparse r' instead of the rewritten dense law, the band
    mass subtracted or summed over the whole batch, (w - dense / Z)^+ after a rejection) or
    picks the wrong x* when every fill survives and x* is the last kept token."""
    cfg = FastConfig(**{**_STRONG, **STRONG_VARIANTS[variant]})
    model = HashTableModel(6, 12, seed=11, rows=4096, scale=1.0, draft_noise=1.0, dtype=torch.float64)
    statuses = _decides_as_reference(model, cfg, [0.5, 1.0, 1.5, 2.0] * 3, range(4))
    assert statuses.count("equal") >= 0.9 * len(statuses), statuses


def test_class_law_skips_the_stochastic_step_when_the_sample_was_pruned():
    """docs/spec.md §4 ``class_law``: the stochastic step runs only "where the sample child
    survived"; otherwise every surviving child gets a point-mass step. Designed so that the
    visited depth-1 node lost its sample child to pruning while a fill holding token 0
    survives (a constant proxy 0.5 under a peaked draft law): a verifier that ran the
    stochastic step on that fill (the missing sample's token reads as 0) decides otherwise."""
    V = 4

    def draft(i, pre):
        return [0.0] * V if not pre else [3.0, 0.0, 0.0, 0.0]

    def target(i, pre):
        g = np.random.default_rng([i, len(pre), *pre])
        return list(g.normal(size=V))

    model = PrefixTableModel(V, 16, target, draft)
    cfg = FastConfig(K=2, depth=2, budget=3, m=0, beam=1, draft_top_k=None, proxy=0.5, verify="class_law")
    T = torch.full((16,), 2.0, dtype=torch.float64)
    u = Uniforms.random(16, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(0))
    tree = build_tree(model.draft_logits, cfg, T, u)
    kids = tree.children[:, 1]  # node 0 (the root's sample): its sample slot pruned, a fill kept
    assert bool(((kids[:, 0] < 0) & (kids[:, 1] >= 0)).any())
    _decides_as_reference(model, cfg, [2.0] * 16, range(6))


def test_constant_proxy_with_a_single_kept_token():
    """K = 1, m = 0, draft_top_k = 1: the ranked draft law has one entry (W = 1), so the
    constant proxy must be shaped from that one column; a proxy read from a second column
    fails. The fastpath decides as the reference (docs/spec.md §2, a constant proxy c)."""
    cfg = FastConfig(K=1, depth=2, budget=2, m=0, beam=1, draft_top_k=1, proxy=0.25)
    model = HashTableModel(5, 4, seed=3, rows=4096, dtype=torch.float64)
    _decides_as_reference(model, cfg, [0.0, 0.5, 1.0, 1.5], range(3))


def test_near_threshold_requests_are_rare():
    """The margin rule must not hide the comparison: over 300 random requests, at most 2%
    are set aside as near a threshold."""
    statuses = []
    rng = np.random.default_rng(7)
    for k in range(100):
        K = int(rng.integers(1, 5))
        cfg = FastConfig(
            K=K,
            depth=int(rng.integers(1, 4)),
            budget=int(rng.integers(1, 3 * K + 1)),
            m=int(rng.integers(0, K)),
            draft_top_k=None,
        )
        model = HashTableModel(int(rng.integers(2, 7)), 3, seed=k, rows=4096, dtype=torch.float64)
        statuses += [c.status for c in run_batch(model, cfg, [0.5, 1.0, 0.0], k)]
    print(
        f"near-threshold census: {statuses.count('equal')} equal, {statuses.count('near')} set aside of {len(statuses)}"
    )
    assert "differs" not in statuses
    assert statuses.count("near") <= 6, statuses.count("near")


# ---- designed exact ties (values exactly representable, so both engines see the tie) ----


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(designed_ties()))
def test_designed_exact_ties_follow_the_spec(name, device):
    """Score ties under both tie-breaks, draft_top_k boundary ties, depth ties, target ties
    and the float32 near tie (``rheo.checks.differential.designed_ties``): every request
    equals the reference, on the CPU and on a CUDA device (the near tie there too: a float32
    softmax or product computed otherwise on the device would show)."""
    n, bad = check_designed_ties(designed_ties()[name], device)
    assert n > 0 and not bad, bad[:3]


def test_float32_near_tie_needs_float64_path_scores():
    """The designed float32 near tie (``float32_near_tie``) is what it says: the two depth-2
    scores B > A differ by more than the comparison's margin and less than half a float32
    ulp, float32 products of the float32 factors tie, and the fastpath's float64 scores keep
    B first, so T_R at budget 4 holds B's slot path (1, 0) and not A's (0, 1)."""
    model, cfgs, temps, _ = float32_near_tie()
    cfg = next(c for c in cfgs if c.budget == 4)
    T = torch.tensor(temps, dtype=torch.float64)
    tree = build_tree(model.draft_logits, cfg, T, Uniforms.random(2, cfg.K, cfg.B, cfg.depth))
    q = {
        pre: torch.softmax(torch.tensor(model.fns["draft"](0, pre), dtype=torch.float32), -1)
        for pre in ((), (0,), (1,))
    }
    A32, B32 = q[()][0] * q[(0,)][1], q[()][1] * q[(1,)][0]  # float32 products
    A, B = float(q[()][0]) * float(q[(0,)][1]), float(q[()][1]) * float(q[(1,)][0])  # exact in float64
    assert bool(A32 == B32) and 1e-9 < (B - A) / B < 2.0**-25
    assert tree.scores.dtype == torch.float64
    for i in range(2):
        paths = tree.slot_paths(i)
        assert (1, 0) in paths and (0, 1) not in paths
        assert float(tree.scores[i, paths.index((1, 0))]) == B


def test_draft_top_k_boundary_keeps_the_lower_ids():
    """Draft logits (2, 1, 1, 1, 0, 1): keeping 3 must take ids 0, 1, 2 (ties -> lower id)."""
    model, cfgs, _, _ = designed_ties()["draft_top_k boundary ties"]
    for cfg in cfgs:
        T = torch.tensor([1.0, 1.0], dtype=torch.float64)
        tree = build_tree(model.draft_logits, cfg, T, Uniforms.random(2, 3, 3, 2, torch.Generator().manual_seed(0)))
        assert set(tree.tokens[0, tree.depth[0] == 1].tolist()) == {0, 1, 2}
