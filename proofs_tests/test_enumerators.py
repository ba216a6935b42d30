"""The naive enumerator (every joint draw) and the class enumerator agree exactly."""

import pytest
from hypothesis import given, settings

from rheo.casefile import load_case
from rheo.checks.cases.strategies import cases
from rheo.reference import class_cycle_law, naive_cycle_law

from .helpers import describe

VARIANTS = [
    {},
    {"proxy": "self"},
    {"tie_break": "token"},
    {"verify": "class_law"},
    {"verify": "sample_last"},
    {"proxy": {"constant": "1/4"}},
    {"draft_law": "untempered"},
    {"draft_law": "dense", "draft_top_k": 2},
    {"target_top_k": 2, "target_top_p": "3/4", "target_min_p": "1/10"},
]


def check(case):
    naive = naive_cycle_law(load_case(case))
    fast = class_cycle_law(load_case(case))
    assert fast.law == naive.law, describe(case)
    assert fast.joint_draws == naive.joint_draws, describe(case)
    assert fast.classes == naive.classes, describe(case)
    assert naive.total() == 1


@given(cases(cap=400))
def test_naive_and_class_enumerators_agree(case):
    check(case)


@pytest.mark.parametrize(
    "variant",
    VARIANTS,
    ids=["default", "self", "token", "class_law", "sample_last", "constant", "untempered", "dense", "filters"],
)
@given(case=cases(cap=300, policies=("rheo",)))
def test_naive_and_class_enumerators_agree_on_variants(variant, case):
    check({**case, **variant})


@given(cases(cap=300))
def test_naive_and_class_enumerators_agree_in_float64(case):
    case = {**case, "arithmetic": "float64"}
    naive = naive_cycle_law(load_case(case))
    fast = class_cycle_law(load_case(case))
    assert fast.classes == naive.classes and fast.joint_draws == naive.joint_draws
    assert set(fast.law) == set(naive.law)
    assert all(abs(fast.law[o] - naive.law[o]) <= 1e-12 for o in naive.law)


@pytest.mark.extended
@settings(max_examples=1000)
@given(cases(cap=20000))
def test_naive_and_class_enumerators_agree_up_to_20000_joint_draws(case):
    check(case)
