"""docs/spec.md §0-§1: parsing, temperature, truncation and the target filters."""

from decimal import Decimal
from fractions import Fraction as F

import pytest

from rheo.reference.numbers import (
    CaseError,
    Temperature,
    apply_filters,
    fmt_number,
    keep_min_p,
    keep_top_k,
    keep_top_p,
    normalize,
    parse_exact,
    positive_part_difference,
    rank_order,
    temper,
)
from rheo.reference.params import TargetFilters

from .deadlines import CountingDeadline


def test_json_numbers_read_as_the_decimal_they_print():
    assert parse_exact(0.1, "x") == F(1, 10)
    assert parse_exact(Decimal("0.3"), "x") == F(3, 10)
    assert parse_exact("3/10", "x") == F(3, 10)
    assert parse_exact(" 0.25 ", "x") == F(1, 4)


@pytest.mark.parametrize("bad", ["abc", "1/0", True, None, [1]])
def test_bad_probabilities_name_the_field(bad):
    with pytest.raises(CaseError) as err:
        parse_exact(bad, 'draft[""][1]')
    assert err.value.field == 'draft[""][1]'


def test_temperature_exact_forms():
    assert Temperature.parse("1/3", exact=True).power == 3
    assert Temperature.parse("0", exact=True).zero
    assert Temperature.parse(1, exact=True).power == 1
    with pytest.raises(CaseError, match="float64"):
        Temperature.parse("0.7", exact=True)
    with pytest.raises(CaseError, match=">= 0"):
        Temperature.parse("-1", exact=False)
    assert Temperature.parse("0.7", exact=False).value == pytest.approx(0.7)


def test_temper_power_and_zero_with_ties_to_lowest_id():
    p = (F(1, 3), F(1, 3), F(1, 3) * 0 + F(1, 3))
    assert temper(p, Temperature.parse("0", True)) == (1, 0, 0)
    q = (F(1, 4), F(3, 4))
    assert temper(q, Temperature.parse("1/2", True)) == (F(1, 10), F(9, 10))
    f = temper((0.25, 0.75, 0.0), Temperature.parse("0.5", False))
    assert f == pytest.approx((0.1, 0.9, 0.0))


def test_temper_a_float_temperature_that_is_no_reciprocal_integer():
    """T = 3/2 in float64 (1/T = 2/3 is no integer, so no exact power): p_T(x) is p(x)^(2/3)
    normalized on the same support. By hand: 0.2^(2/3) = 0.3419952, 0.8^(2/3) = 0.8617739, so
    p_T = (0.284104, 0.715896, 0); a zero stays zero."""
    assert temper((0.2, 0.8, 0.0), Temperature.parse("1.5", False)) == pytest.approx(
        (0.284104, 0.715896, 0.0), abs=1e-6
    )
    assert temper((0.5, 0.5), Temperature.parse("0.7", False)) == pytest.approx((0.5, 0.5))


def test_temper_at_zero_on_a_one_token_vocabulary():
    """T = 0 on V = 1 is the one-hot on the only token, in the law's own number type."""
    assert temper((F(1),), Temperature.parse("0", True)) == (F(1),)
    assert temper((1.0,), Temperature.parse("0", False)) == (1.0,)


def test_rank_order_and_top_k_ties_go_to_lower_id():
    q = (F(1, 4), F(1, 4), F(1, 2), F(0))
    assert rank_order(q) == [2, 0, 1]
    assert keep_top_k(q, 2) == (F(1, 3), F(0), F(2, 3), F(0))


def test_top_p_keeps_shortest_prefix_reaching_p_and_min_p_drops_small():
    p = (F(1, 10), F(1, 2), F(3, 10), F(1, 10))
    assert keep_top_p(p, F(1, 2)) == (0, 1, 0, 0)
    assert keep_top_p(p, F(4, 5)) == (0, F(5, 8), F(3, 8), 0)
    assert keep_top_p(p, F(9, 10)) == (F(1, 9), F(5, 9), F(3, 9), 0)  # tie 1/10: lower id first
    assert keep_min_p(p, F(1, 4)) == (0, F(5, 8), F(3, 8), 0)
    assert apply_filters(p, TargetFilters(top_k=3, top_p=F(4, 5))) == (0, F(5, 8), F(3, 8), 0)


def test_every_loop_over_a_law_reads_the_deadline():
    """Each loop over the vocabulary is paced (docs/spec.md §0; `rheo exact` stops at its
    deadline even on a huge vocabulary): the checks are counted per loop, so a loop that
    drops its deadline is caught, which an already-expired deadline (stopped by the first
    loop) would not catch. n entries: ``normalize`` reads it n - 1 times for the total and
    n for the division; ``rank_order`` n; ``keep_top_p`` once between each two ranked
    tokens it keeps."""
    vec = (F(2, 5), F(3, 10), F(1, 5), F(1, 10))
    n = len(vec)
    cases = [
        (lambda d: normalize(vec, d), 2 * n - 1),
        (lambda d: keep_min_p(vec, F(1, 2), d), n + n + 2 * n - 1),
        (lambda d: keep_top_k(vec, 2, d), n + n + 2 * n - 1),
        (lambda d: keep_top_p(vec, F(3, 5), d), n + 1 + n + 2 * n - 1),  # keeps 2 ranked tokens
        (lambda d: temper(vec, Temperature.parse("1/2", exact=True), d), n + 2 * n - 1),
        (lambda d: temper(vec, Temperature.parse("0", exact=True), d), n - 1),
        (lambda d: temper(vec, Temperature.parse("1", exact=True), d), 2 * n - 1),  # normalize alone
        (lambda d: temper(tuple(map(float, vec)), Temperature.parse("1.5", exact=False), d), n + 2 * n - 1),
        (lambda d: positive_part_difference(vec, tuple(reversed(vec)), d), n),
        # the filters in their order, each with its own count: top_k 2 (as above), then top_p 1/2
        # on (4/7, 3/7, 0, 0) keeps 1 ranked token (no check between kept tokens), then min_p
        (lambda d: apply_filters(vec, TargetFilters(top_k=2, top_p=F(1, 2), min_p=F(1, 2)), d), 3 * (4 * n - 1)),
    ]
    for run, checks in cases:
        deadline = CountingDeadline()
        plain = run(None)
        assert run(deadline) == plain
        assert deadline.checks == checks


def test_min_p_and_top_p_on_a_one_token_vocabulary_keep_the_token():
    assert keep_min_p((F(1),), F(1, 2)) == (F(1),)
    for top_p in (F(1, 2), F(1)):
        assert keep_top_p((F(1),), top_p) == (F(1),) and keep_top_p((1.0,), float(top_p)) == (1.0,)
    assert keep_top_k((F(1),), 1) == (F(1),) and keep_top_k((1.0,), 3) == (1.0,)
    assert positive_part_difference((F(1),), (F(1),)) == [0] and positive_part_difference((1.0,), (0.5,)) == [0.5]


def test_case_errors_keep_their_field_message_and_list():
    first, second = CaseError("a", "is wrong"), CaseError("b", "is missing")
    assert (first.field, first.message, str(first), first.errors) == ("a", "is wrong", "a: is wrong", [first])
    both = CaseError("a", "is wrong", [first, second])
    assert both.errors == [first, second]


def test_numbers_for_json():
    assert fmt_number(F(3), True) == "3" and fmt_number(F(-6, 4), True) == "-3/2" and fmt_number(F(1, 2), True) == "1/2"
    assert fmt_number(F(1, 4), False) == 0.25 and isinstance(fmt_number(F(1), False), float)


def test_rank_order_of_a_long_law_under_a_deadline_sorts_runs_and_merges_them():
    """More than RANK_RUN positive entries under a deadline: the order is found by sorting runs
    of RANK_RUN ids and merging them, and it is the same order (mass desc, id asc, zeros left
    out) as one sort. The deadline is read once per entry scanned, once per run, and once per
    id merged; at exactly RANK_RUN positive entries there is one sort, read once per entry."""
    from rheo.reference.numbers import RANK_RUN

    n = 2 * RANK_RUN + 200
    vec = [F(i * 7919 % 97, 97) for i in range(n)]  # ties between equal masses; every 97th is 0
    ids = [i for i in range(n) if vec[i] > 0]
    assert len(ids) > 2 * RANK_RUN
    one_sort = sorted(ids, key=lambda i: (-vec[i], i))
    deadline = CountingDeadline()
    assert rank_order(vec, deadline) == one_sort == rank_order(vec)
    runs = -(-len(ids) // RANK_RUN)
    assert runs == 3 and deadline.checks == n + runs + len(ids)
    assert deadline.checked["ranking tokens"] == runs
    exact_run = [F(1)] * RANK_RUN + [F(0)] * 3
    deadline = CountingDeadline()
    assert rank_order(exact_run, deadline) == list(range(RANK_RUN)) and deadline.checks == RANK_RUN + 3
