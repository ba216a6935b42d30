"""Lemma 1: an identity-independent proxy >= q(x_{m+1}) keeps RheoSampling lossless; below
the bound, or depending on the drawn token ("self"), it breaks - with the paper's numbers."""

from fractions import Fraction as F

from hypothesis import given

from rheo.checks.cases.corpus import CONTROLS_BY_NAME, find_counterexample
from rheo.checks.cases.strategies import per_node_proxy_cases
from rheo.reference import certify, make_instance

from .helpers import cap, describe, report


@given(per_node_proxy_cases(above_bound=True, cap=cap()))
def test_lemma1_per_node_proxy_at_or_above_rank_bound_is_lossless(case):
    r = report(case)
    assert r.deviation.value == 0, f"{describe(case)}: deviation {r.deviation}"


def test_lemma1_proxy_below_rank_bound_breaks():
    case = find_counterexample(CONTROLS_BY_NAME["per_node_proxy_below_bound"])
    assert report(case).deviation.value > 0


def test_lemma1_constant_proxy_breaks():
    case = find_counterexample(CONTROLS_BY_NAME["constant_proxy"])
    assert report(case).deviation.value > 0


def test_lemma1_self_proxy_breaks():
    case = find_counterexample(CONTROLS_BY_NAME["self_proxy"])
    assert report(case).deviation.value > 0


def _abc(**extra):
    return make_instance(
        3, ["1/5", "1/2", "3/10"], ["1/2", "3/10", "1/5"], policy="rheo", K=3, m=1, depth=1, budget=2, **extra
    )


def test_lemma1_paper_abc_example_breaks_with_spec_numbers():
    good = certify(_abc())
    assert good.lossless
    assert good.cycle.first_token_law(3) == [F(1, 5), F(1, 2), F(3, 10)]
    bad = certify(_abc(proxy={"constant": "1/4"}))
    assert bad.cycle.first_token_law(3) == [F(9, 50), F(7, 10), F(3, 25)]
    first_dev = max(abs(a - b) for a, b in zip(bad.cycle.first_token_law(3), [F(1, 5), F(1, 2), F(3, 10)]))
    assert first_dev == F(1, 5)
    assert bad.deviation.value == F(1, 10)
    # the rank bound at the root is q(x_2) = 3/10: 1/4 is below it, the rheo proxy 1/2 is not
    assert _abc().rank_bound(()) == F(3, 10)
