"""The fastpath's laws on logits against the reference's readings (docs/spec.md §0, §1, §7)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from rheo.fastpath import TargetFilters, inverse_cdf, ranked_topk, target_law  # noqa: E402
from rheo.reference.numbers import (  # noqa: E402
    Temperature,
    apply_filters,
    rank_order,
    temper,
)
from rheo.testing.ranges import law_violations  # noqa: E402


def test_ranked_topk_breaks_ties_by_lower_id():
    """Tie-heavy random rows: the kept tokens with mass are the first k of (value desc, id
    asc), in that order (entries of -inf carry no mass and may come in any order)."""
    g = torch.Generator().manual_seed(0)
    for _ in range(300):
        V = int(torch.randint(2, 30, (1,), generator=g))
        k = int(torch.randint(1, V + 1, (1,), generator=g))
        x = torch.randint(0, 4, (3, 2, V), generator=g).double()
        x[x == 0] = float("-inf")
        vals, ids = ranked_topk(x, k)
        assert vals.shape == ids.shape == (3, 2, k)
        for a in range(3):
            for b in range(2):
                kept = (t for t in range(V) if x[a, b, t] > float("-inf"))
                want = sorted(kept, key=lambda t: (-x[a, b, t].item(), t))
                got = [t for t in ids[a, b].tolist() if x[a, b, t] > float("-inf")]
                assert got == want[:k]


@pytest.mark.parametrize("T", [0.0, 0.5, 1.0, 1.7])
@pytest.mark.parametrize(
    "filters", [(None, None, None), (2, None, None), (None, 0.7, None), (None, None, 0.2), (3, 0.9, 0.05)]
)
def test_target_law_matches_reference(T, filters):
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(20, 7, generator=g, dtype=torch.float64) * 2
    got = target_law(logits, torch.full((20,), T, dtype=torch.float64), TargetFilters(*filters))
    assert law_violations(got, "target_law") == []  # in [0, 1], every row summing to 1
    temp = Temperature.parse(repr(T), exact=False)
    for row, p in zip(logits.tolist(), got.tolist()):
        q = [math.exp(x) for x in row]
        q = [x / sum(q) for x in q]
        want = apply_filters(temper(q, temp), TargetFilters(*filters))
        assert max(abs(a - b) for a, b in zip(p, want)) < 1e-12


def test_inverse_cdf_skips_zero_mass_and_falls_back_to_the_last_token():
    p = torch.tensor([[0.0, 0.5, 0.0, 0.5, 0.0]] * 4, dtype=torch.float64)
    u = torch.tensor([0.0, 0.49, 0.5, 1.0], dtype=torch.float64)  # 1.0 only reachable by rounding
    assert inverse_cdf(p, u).tolist() == [1, 1, 3, 3]
    assert rank_order([0.0, 0.5, 0.0, 0.5]) == [1, 3]
    # the last entry *with mass*, even one too small to move the float sum (docs/spec.md §7)
    tiny = torch.tensor([[1.0, 1e-20, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    assert inverse_cdf(tiny, torch.tensor([1.0, 0.5], dtype=torch.float64)).tolist() == [1, 2]


# Designed rows (V = 5, dyadic, so every sum is exact): a top-p run of exactly p, min_p at exactly
# the threshold, ties across the top-k and top-p boundaries (kept by lower id), a zero entry.
BOUNDARY_ROWS = [
    (0.5, 0.25, 0.125, 0.125, 0.0),
    (0.25, 0.25, 0.25, 0.25, 0.0),
    (0.125, 0.25, 0.125, 0.5, 0.0),
]
BOUNDARY_FILTERS = [
    TargetFilters(top_p=0.75),  # 0.5 + 0.25 reaches 0.75 exactly: two tokens, not three
    TargetFilters(top_p=0.5),  # a tie at the boundary: the lower ids
    TargetFilters(min_p=0.25),  # 0.125 = 0.25 x 0.5 exactly: kept
    TargetFilters(min_p=0.5),
    TargetFilters(top_k=2),  # ties at the k-th place: the lower ids
    TargetFilters(top_k=3, top_p=0.8, min_p=0.3),
]


@pytest.mark.parametrize("filters", BOUNDARY_FILTERS, ids=str)
def test_filters_at_their_exact_boundaries_on_any_leading_shape(filters):
    """docs/spec.md §0 at the boundaries the reference decides exactly: the fastpath's
    filters give the reference's law bit for bit on dyadic rows, on a [2, 3, V] tensor (the
    filters work on the last dimension whatever the leading shape)."""
    from rheo.fastpath.laws import apply_filters as fast_filters

    rows = BOUNDARY_ROWS + BOUNDARY_ROWS[::-1]
    got = fast_filters(torch.tensor(rows, dtype=torch.float64).reshape(2, 3, 5), filters)
    want = [list(apply_filters(row, filters)) for row in rows]
    assert got.reshape(6, 5).tolist() == want


def test_top_k_of_the_whole_vocabulary_leaves_the_law_untouched():
    """top_k >= V keeps every token and is no filter at all: the law comes back bit for bit,
    not renormalized (a softmax row whose float sum is not exactly 1 would change)."""
    from rheo.fastpath.laws import apply_filters as fast_filters

    p = torch.softmax(torch.randn(2, 4, 9, generator=torch.Generator().manual_seed(3), dtype=torch.float64), -1)
    assert bool((p.sum(-1) != 1.0).any())  # the designed case holds
    for k in (9, 12):
        assert torch.equal(fast_filters(p, TargetFilters(top_k=k)), p)
