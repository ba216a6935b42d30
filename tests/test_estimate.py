"""``work_estimate``'s counts, computed by hand from the formulas of its module text
(reference/estimate.py): s_root draws at the root, s at every other expansion, B(D-1)
expansions below the root, f + 1 = K - m ways for a grouped last-layer expansion.
``tests/test_exact_bounds.py`` checks that the estimates bound what the enumerators
really do; these pin the numbers themselves, so an estimate that grows (and refuses cases
it should run) fails too (issue 24: mutation-testing survivors)."""

import math

import pytest

from rheo.reference import make_instance
from rheo.reference.estimate import HUGE, Estimate, _power, work_estimate

U4 = ["1/4"] * 4


def _inst(draft=None, n=4, **config):
    base = dict(policy="rheo", K=3, m=1, depth=2, budget=4)
    return make_instance(n, [f"1/{n}"] * n, U4 if draft is None else draft, **{**base, **config})


@pytest.mark.parametrize(
    "draft, config, naive, classes, exact",
    [
        # 3 draws at the root and at each of the B = 3 expansions below; grouped: 1 fill + 1 group
        (None, {}, 81, 3 * 2**3, True),
        # tie_break token: nothing is grouped, the last layer branches s = 3 ways
        (None, {"tie_break": "token"}, 81, 81, True),
        # the "self" proxy depends on identities: nothing is grouped either
        (None, {"proxy": "self"}, 81, 81, True),
        # D = 3, beam 2: joint 3 * 3^(2*2); branches 3 * 3^(2*1) * 2^2
        (None, {"depth": 3, "beam": 2}, 243, 3 * 9 * 4, True),
        # m = 0: 4 draws, f = 2 fills, groups of f + 1 = 3 ways
        (None, {"m": 0}, 4 * 4**3, 4 * 3**3, True),
        # draft_top_k 2 leaves one draw past the lead: one tree, and the support is below K
        (None, {"draft_top_k": 2}, 1, 1, False),
        # draft_top_k 3 = K: two draws per expansion
        (None, {"draft_top_k": 3}, 2 * 2**3, 2 * 2**3, True),
        # T = 0: one draw per expansion, whatever the support
        (None, {"temperature": 0}, 1, 1, True),
        # float64 tables: the count is still the naive one, but not claimed exact
        (None, {"arithmetic": "float64"}, 81, 24, False),
        # D = 1: only the root branches (grouped: min(3, f + 1) = 2)
        (None, {"depth": 1}, 3, 2, True),
        (None, {"depth": 1, "tie_break": "token"}, 3, 3, True),
        # D = 1 at T = 0: one tree, one branch
        (None, {"depth": 1, "temperature": 0}, 1, 1, True),
        # one draw per expansion at D = 3: the middle layer multiplies by 1^B, the last by min(1, f + 1)^B
        (None, {"depth": 3, "draft_top_k": 2}, 1, 1, False),
        # a root law of support 2 (one draw) and a default of support 4 (3 draws) below
        ({(): ["1/2", "1/2", "0", "0"], "*": U4}, {}, 1 * 3**3, 1 * 2**3, False),
        # a zero in the only law: 2 draws everywhere, support 3 = K still counts as exact
        (["1/3", "1/3", "1/3", "0"], {}, 2 * 2**3, 2 * 2**3, True),
    ],
)
def test_counts_by_hand(draft, config, naive, classes, exact):
    inst = _inst(draft, **config)
    n, c = work_estimate(inst, "naive"), work_estimate(inst, "classes")
    assert n == Estimate("joint draws", float(naive), exact, float(naive))
    assert c == Estimate("class-enumerator branches", float(classes), False, float(naive))


def test_the_default_enumerator_is_the_class_enumerator():
    inst = _inst()
    assert work_estimate(inst) == work_estimate(inst, "classes")


def test_top_k_draws_nothing():
    inst = _inst(policy="topk")
    assert work_estimate(inst, "naive") == Estimate("joint draws", 1.0, True, 1.0)
    assert work_estimate(inst, "classes") == Estimate("class-enumerator branches", 1.0, True, 1.0)


def test_a_table_from_a_function_allows_every_token():
    # a callable draft table: any support up to vocab_size, and never exact
    inst = make_instance(
        5, ["1/5"] * 5, lambda prefix: ["1/2", "1/2", "0", "0", "0"], policy="rheo", K=3, m=1, depth=2, budget=4
    )
    e = work_estimate(inst, "naive")
    assert e.count == 4 * 4**3 and not e.exact


def test_huge_counts_are_capped_not_overflowed():
    n = 200
    inst = make_instance(n, [f"1/{n}"] * n, [f"1/{n}"] * n, policy="rheo", K=10, m=1, depth=40, budget=20)
    e = work_estimate(inst, "naive")
    assert e.count == HUGE and e.joint_draws == HUGE and math.isfinite(e.count)
    assert work_estimate(inst, "classes").count == HUGE


def test_power():
    assert [_power(0, 5), _power(1, 9), _power(7, 0), _power(5, 1), _power(3, 4), _power(10, 299)] == [
        1.0,
        1.0,
        1.0,
        5.0,
        81.0,
        1e299,
    ]
    assert _power(10, 300) == HUGE and _power(2, 997) == HUGE and _power(2, 10_000) == HUGE  # 2^997 ~ 1.3e300
    assert type(_power(3, 4)) is float
