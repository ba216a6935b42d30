"""Theorem 1: RheoSampling and Top-K are lossless for every budget, exactly."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rheo.checks.cases.strategies import cases

from .helpers import cap, describe, report


@given(cases(cap=cap()))
def test_theorem1_rheo_and_topk_lossless_any_budget(case):
    r = report(case)
    assert r.deviation.value == 0, f"{describe(case)}: deviation {r.deviation}"
    assert r.cycle.total() == 1


@given(cases(cap=cap(), filters=True))
def test_theorem1_lossless_with_target_filters(case):
    r = report(case)
    assert r.deviation.value == 0, f"{describe(case)}: deviation {r.deviation}"


@given(cases(cap=cap(), policies=("rheo",), m=0, extra=st.sampled_from([{"epsilon": "1/10"}, {"epsilon": "1"}])))
def test_theorem1_lossless_m0_with_positive_epsilon(case):
    r = report(case)
    assert r.deviation.value == 0, f"{describe(case)}: deviation {r.deviation}"


@pytest.mark.extended
@settings(max_examples=3000)
@given(cases(cap=60000, max_vocab=5, max_depth=4, filters=True))
def test_theorem1_lossless_to_depth_4_with_filters(case):
    assert report(case).deviation.value == 0
