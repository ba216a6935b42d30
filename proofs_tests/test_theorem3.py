"""Theorem 3 (single layer): the closed form equals the enumeration; no lossless verifier
beats the per-node transport LP; RheoVerification reaches it when the pool has no fills."""

from fractions import Fraction as F

import pytest
from hypothesis import given

from rheo.casefile import load_case
from rheo.checks.cases.strategies import cases
from rheo.reference import class_cycle_law
from rheo.reference.theorem3 import child_set_law, per_node_optimum_exact, per_node_optimum_lp, theorem3_alpha

from .helpers import cap, describe
from .symbolic import prove_theorem3

single_layer = cases(cap=cap(), max_depth=1, max_vocab=6)


@given(single_layer)
def test_theorem3_closed_form_equals_enumeration(case):
    inst = load_case(case)
    law = class_cycle_law(inst, count_draws=False)
    assert theorem3_alpha(inst) == law.root_acceptance(), describe(case)
    assert law.tau() == 1 + law.root_acceptance()


@given(single_layer)
def test_theorem3_lp_bound_never_exceeded_by_lossless_verifiers(case):
    for verify in ("rheo", "class_law") if case["policy"] == "rheo" else ("rheo",):
        inst = load_case({**case, "verify": verify})
        law = class_cycle_law(inst, count_draws=False)
        p = inst.target_law(())
        sets = child_set_law(law.trees)
        exact = per_node_optimum_exact(p, sets)
        assert abs(per_node_optimum_lp(p, sets) - float(exact)) < 1e-9
        assert law.root_acceptance() <= exact, f"{verify}: {describe(case)}"


@given(cases(cap=cap(), max_depth=1, max_vocab=6, policies=("rheo",), m="K-1"))
def test_theorem3_rheo_reaches_lp_bound_without_fills(case):
    """K - m - 1 = 0: the deterministic set (the leads) does not depend on Y."""
    inst = load_case(case)
    law = class_cycle_law(inst, count_draws=False)
    sets = child_set_law(law.trees)
    assert law.root_acceptance() == per_node_optimum_exact(inst.target_law(()), sets), describe(case)


def test_theorem3_rheo_falls_short_of_the_optimum_with_fills():
    """docs/spec.md §5: with fills the deterministic set depends on Y, and RheoVerification can stay
    below the per-node optimum (class_law closes the gap at depth 1)."""
    from hypothesis import Phase, find, settings

    def gap(case):
        inst = load_case(case)
        law = class_cycle_law(inst, count_draws=False)
        return law.root_acceptance() < per_node_optimum_exact(inst.target_law(()), child_set_law(law.trees))

    case = find(
        cases(max_depth=1, policies=("rheo",), min_K=2),
        gap,
        settings=settings(database=None, derandomize=True, max_examples=3000, phases=[Phase.generate, Phase.shrink]),
    )
    assert case["K"] - case["m"] - 1 >= 1 and case["budget"] >= case["m"] + 2


@given(cases(cap=cap(), max_depth=1, max_vocab=6, policies=("rheo",), extra={"verify": "class_law"}))
def test_class_law_is_lossless_and_optimal_at_depth_one(case):
    inst = load_case(case)
    law = class_cycle_law(inst, count_draws=False)
    from rheo.reference import max_deviation

    assert max_deviation(inst, law.law).value == 0, describe(case)
    assert law.root_acceptance() == per_node_optimum_exact(inst.target_law(()), child_set_law(law.trees))


REGIONS = [
    # (witness p, witness q, K, m): general position, n = 4 so the pool (K = 3) leaves a token out
    ((F(1, 10), F(2, 5), F(3, 10), F(1, 5)), (F(2, 5), F(3, 10), F(1, 5), F(1, 10)), 3, 1),
    ((F(1, 10), F(2, 5), F(3, 10), F(1, 5)), (F(2, 5), F(3, 10), F(1, 5), F(1, 10)), 3, 0),
    ((F(7, 20), F(1, 20), F(9, 20), F(3, 20)), (F(9, 20), F(1, 4), F(1, 5), F(1, 10)), 3, 1),
]


@pytest.mark.parametrize("wp,wq,K,m", REGIONS)
def test_theorem3_symbolic_proof_on_region(wp, wq, K, m):
    proof = prove_theorem3(wp, wq, K, m)
    assert proof.holds, (proof.enumerated, proof.closed_form)
    assert proof.region, "a region with no conditions would mean no branch was taken"
    # the witness lies in the region (sanity of the recorded conditions)
    subs = dict(zip(proof.symbols, list(wp[:-1]) + list(wq[:-1])))
    assert all(bool(cond.subs(subs)) for cond in proof.region)
    # and the identity is not trivial: alpha is not constant on the region
    assert proof.enumerated.free_symbols


def _abc(**config):
    from rheo.reference import make_instance

    base = dict(policy="rheo", K=3, m=1, depth=1, budget=2)
    return make_instance(3, ["1/5", "1/2", "3/10"], ["1/2", "3/10", "1/5"], **{**base, **config})


@pytest.mark.parametrize(
    "config, applies",
    [
        ({}, True),
        ({"policy": "topk"}, True),
        ({"policy": "topk", "proxy": "self", "tie_break": "token"}, True),  # Top-K draws nothing: no proxy, no ties
        ({"depth": 2}, False),
        ({"policy": "topk", "depth": 2}, False),
        ({"proxy": "self"}, False),
        ({"proxy": {"constant": "1/2"}}, False),
        ({"verify": "sample_last"}, False),
        ({"draft_law": "dense"}, False),
        ({"tie_break": "token"}, False),
    ],
)
def test_theorem3_applies_exactly_to_its_configurations(config, applies):
    """Theorem 3 covers depth 1 with Top-K, or Rheo with the rheo proxy, rheo verification,
    the sampled draft law and slot tie-break (docs/spec.md §5); anything else is refused."""
    from rheo.reference.theorem3 import theorem3_applies

    inst = _abc(**config)
    assert theorem3_applies(inst) is applies
    if applies:
        assert theorem3_alpha(inst) == class_cycle_law(inst, count_draws=False).root_acceptance()
    else:
        with pytest.raises(ValueError, match="Theorem 3 covers depth 1 with policy topk, or rheo with the rheo proxy"):
            theorem3_alpha(inst)


@pytest.mark.parametrize(
    "target, draft, config, alpha",
    [
        # the target is the residual (0, 1/2, 1/2) left by the lead 0: beta = 0, every cycle accepts
        (["0", "1/2", "1/2"], ["1/2", "1/4", "1/4"], {"K": 2, "m": 1, "budget": 2}, F(1)),
        # K 3, m 1: one fill per sample, but the budget 2 keeps the lead and the sample only
        (["1/10", "2/5", "3/10", "1/5"], ["2/5", "3/10", "1/5", "1/10"], {"K": 3, "m": 1, "budget": 2}, None),
        # K 4, m 1: two fills, the budget 3 keeps one of them
        (["1/10", "2/5", "3/10", "1/5"], ["2/5", "3/10", "1/5", "1/10"], {"K": 4, "m": 1, "budget": 3}, None),
    ],
)
def test_theorem3_at_its_edges(target, draft, config, alpha):
    """Designed where the closed form has a branch the generated cases seldom reach: beta = 0
    (alpha is then 1 by hand), and a budget that cuts the fills (R - m - 1 < K - m - 1). The
    closed form equals the enumeration."""
    from rheo.reference import make_instance

    inst = make_instance(len(target), target, draft, policy="rheo", depth=1, **config)
    enumerated = class_cycle_law(inst, count_draws=False).root_acceptance()
    assert theorem3_alpha(inst) == enumerated
    if alpha is not None:
        assert enumerated == alpha
    else:
        assert 0 < enumerated < 1


def test_theorem3_on_a_one_token_vocabulary():
    from rheo.reference import make_instance

    inst = make_instance(1, ["1"], ["1"], policy="topk", K=1, depth=1, budget=1)
    assert theorem3_alpha(inst) == 1  # Top-K keeps the one token, accepted w.p. p = 1


def test_theorem3_reads_the_deadline_over_the_vocabulary():
    """Rheo m = 1 on p = (1/5, 1/2, 3/10), q ranking 0, 1, 2: (p - r)^+ is one pass over the
    3 tokens, beta one more over the last 2, then one check per residual draw (2 tokens)."""
    from rheo.reference import make_instance
    from tests.deadlines import CountingDeadline

    d = CountingDeadline()
    inst = make_instance(
        3, ["1/5", "1/2", "3/10"], ["1/2", "3/10", "1/5"], deadline=d, policy="rheo", K=3, m=1, depth=1, budget=2
    )
    plain = theorem3_alpha(inst)  # builds and caches the laws
    d.checks = 0
    assert theorem3_alpha(inst) == plain
    assert d.checks == 3 + 2 + 2


def test_the_exact_optimum_on_one_token_and_on_hand_made_sets():
    # one token, always a child: accepted with probability 1
    assert per_node_optimum_exact((F(1),), {frozenset({0}): F(1)}) == 1
    # p = (1/2, 1/2), C = {0} or {1} each w.p. 1/2: a coupling puts X in C always
    half = {frozenset({0}): F(1, 2), frozenset({1}): F(1, 2)}
    assert per_node_optimum_exact((F(1, 2), F(1, 2)), half) == 1
    # p = (3/4, 1/4), C = {1} always: Pr(X in C) = p(1) = 1/4 (A = {1}: p(A) + 0)
    assert per_node_optimum_exact((F(3, 4), F(1, 4)), {frozenset({1}): F(1)}) == F(1, 4)
    assert per_node_optimum_lp((F(3, 4), F(1, 4)), {frozenset({1}): F(1)}) == pytest.approx(0.25)
