"""Laws on logits, batched: temperature and target filters (docs/spec.md §0), the ranked,
truncated draft law (§1), the inverse-CDF draw (§7).

Everything here is the torch reading of ``rheo.reference.numbers``:

- ``ranked_topk(x, k)`` = ``rank_order`` + ``keep_top_k``: the k largest entries ordered by
  (value desc, id asc). ``torch.topk`` promises no order among ties, so ties at the
  k-th place are settled here explicitly (lower id first).
- ``tempered(logits, T)`` = ``temper``: softmax(logits / T), T = 0 the one-hot on the
  argmax (lowest id on ties), a temperature per row.
- ``target_law(logits, T, filters)`` = ``Instance.target_law``: p_T then top_k, top_p,
  min_p, each followed by renormalization.
- ``inverse_cdf(probs, u)``: the first entry whose cumulative mass exceeds u (§7),
  skipping zero-mass entries; rounding near 1 falls back to the last entry with mass.
"""

from __future__ import annotations

import functools

import torch

from rheo.reference.params import TargetFilters

from .inputs import expect


def ranked_topk(x: torch.Tensor, k: int, static: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The k largest entries of ``x`` [..., V] ordered by (value desc, id asc).

    Returns (values [..., k], ids [..., k]); k >= V sorts the whole row. A tie straddling
    the k-th place is settled on the whole row: by default only in the rows that have one,
    found with a host sync; ``static=True`` settles every row without a sync (the form a
    CUDA graph captures): float32 and narrower rows in one ``topk`` on packed keys
    (``_packed_topk``), float64 rows as the default does, in every row.

    >>> v, i = ranked_topk(torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0]), 2)
    >>> i.tolist()
    [1, 2]
    """
    expect("ranked_topk", "x", x, "[..., V]", (..., None), "float")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"ranked_topk: k must be an integer >= 1, got {k!r}")
    V = x.shape[-1]
    if k >= V:
        return torch.sort(x, dim=-1, descending=True, stable=True)
    lead = x.shape[:-1]
    x = x.reshape(-1, V)
    if static and x.dtype in _PACKABLE and V < 2**31:
        vals, ids = _packed_topk(x, k)
        return vals.reshape(lead + (k,)), ids.reshape(lead + (k,))
    vals, ids = torch.topk(x, k + 1, dim=-1, sorted=True)
    thr = vals[..., k - 1]
    tie = vals[..., k] == thr  # a tie straddles the k-th place (also of -inf: settled the same way)
    vals, ids = vals[..., :k], ids[..., :k]
    if static:
        kept = _tie_settled(x, thr.unsqueeze(-1), k)
        vals = torch.where(tie.unsqueeze(-1), x.gather(-1, kept), vals)
        ids = torch.where(tie.unsqueeze(-1), kept, ids)
    elif bool(tie.any()):  # a host sync; the rare tie is settled on the whole row
        vals, ids = vals.contiguous(), ids.contiguous()
        rows = tie.nonzero(as_tuple=True)
        xr, tr = x[rows], thr[rows].unsqueeze(-1)  # [t, V], [t, 1]
        above = xr > tr
        need = k - above.sum(-1, keepdim=True)
        equal = xr == tr
        keep = above | (equal & (torch.cumsum(equal.to(torch.int64), -1) <= need))
        # kept ids in ascending id order: stable sort puts keep=True (key 0) first
        kept = torch.sort((~keep).to(torch.uint8), dim=-1, stable=True).indices[..., :k]
        ids[rows] = kept
        vals[rows] = xr.gather(-1, kept)
    # (value desc, id asc): sort by id, then a stable sort by value (the order kept had is lost)
    ids, perm = torch.sort(ids, dim=-1)
    vals = vals.gather(-1, perm)
    vals, perm = torch.sort(vals, dim=-1, descending=True, stable=True)
    return vals.reshape(lead + (k,)), ids.gather(-1, perm).reshape(lead + (k,))


_PACKABLE = (torch.float32, torch.float16, torch.bfloat16)


def _packed_topk(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``ranked_topk`` of float32 (or narrower) rows x [r, V] in one ``topk``: each entry's
    key packs its value's bits, mapped to a signed integer that orders as the value does,
    above the complement of its id (V - 1 - id), so the key order is (value desc, id asc)
    exactly, ties at the k-th place included. No host sync, no sort, no pass over V beyond
    the key (what a compiled or captured cycle wants); float64 does not fit beside an id."""
    f = x.to(torch.float32) + 0.0  # exact; -0.0 becomes +0.0, which compares equal to it
    bits = f.view(torch.int32)
    ordered = torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits).to(torch.int64)  # the value's order
    V = x.shape[-1]
    rev_id = (V - 1) - torch.arange(V, dtype=torch.int64, device=x.device)
    key = ordered * (2**32) + rev_id
    ids = (V - 1) - (torch.topk(key, k, dim=-1, sorted=True).values & 0xFFFFFFFF)
    return x.gather(-1, ids), ids


def _tie_settled(x: torch.Tensor, thr: torch.Tensor, k: int) -> torch.Tensor:
    """The ids of the k largest entries of every row of x [r, V] by (value desc, id asc),
    in no particular order, given each row's k-th largest value thr [r, 1]: every entry
    above it and the lowest-id entries equal to it."""
    above = x > thr
    equal = x == thr
    need = k - above.sum(-1, keepdim=True)
    keep = above | (equal & (torch.cumsum(equal, -1) <= need))  # exactly k per row
    return torch.topk(keep.to(torch.int8), k, dim=-1).indices


@functools.cache  # never evicted: a captured CUDA graph keeps these tensors' addresses
def positions(n: int, device: torch.device) -> torch.Tensor:
    """0..n-1 as int64 on ``device``, made once per size and device."""
    return torch.arange(n, dtype=torch.int64, device=device)


@functools.cache  # never evicted: a captured CUDA graph keeps these tensors' addresses
def scalar(value: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``value`` as a 0-dim tensor made once per dtype and device: ``torch.where(c, x,
    scalar(0.0, x.dtype, x.device))`` is one op, where a Python number would add one
    (``aten.scalar_tensor``) at every call."""
    return torch.tensor(value, dtype=dtype, device=device)


def _per_row(T: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Temperatures [b] broadcast against ``like`` [b, ..., V]."""
    return T.to(like.dtype).reshape(T.shape + (1,) * (like.dim() - T.dim()))


def tempered(logits: torch.Tensor, T: torch.Tensor) -> torch.Tensor:
    """softmax(logits / T) per row; T = 0 rows are the one-hot on the argmax (docs/spec.md §0).

    logits: [b, ..., V] (-inf = no mass); T: [b]. Returns probabilities, same shape.

    >>> tempered(torch.tensor([[0.0, 1.0, 1.0]]), torch.zeros(1)).tolist()
    [[0.0, 1.0, 0.0]]
    """
    _expect_law_inputs("tempered", logits, T)
    Tb = _per_row(T, logits)
    zero = Tb == 0  # no host sync: every row is divided (by 1 at T = 0, exactly)
    probs = torch.softmax(logits / torch.where(zero, 1.0, Tb), dim=-1)
    hot = torch.zeros_like(probs).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    return torch.where(zero, hot, probs)


def _expect_law_inputs(where: str, logits: torch.Tensor, T: torch.Tensor) -> None:
    expect(where, "logits", logits, "[b, ..., V]", (None, ..., None), "float")
    expect(where, "T", T, "[b]", (logits.shape[0],), "float")


def softmax_or_zero(x: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    """softmax(x) where ``ok`` and 0 elsewhere (an all -inf row is all 0). x, ok: [..., W]."""
    p = torch.nan_to_num(torch.softmax(x, dim=-1), nan=0.0)
    return torch.where(ok, p, torch.zeros_like(p))


def _renormalized(p: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:  # p, keep: [..., V]
    p = torch.where(keep, p, torch.zeros_like(p))
    return p / p.sum(-1, keepdim=True)


def apply_filters(p: torch.Tensor, filters: TargetFilters, static: bool = False) -> torch.Tensor:
    """The target filters on normalized laws p: [..., V] (docs/spec.md §0); ``static``: no
    host sync (``ranked_topk``)."""
    if filters.top_k is not None and filters.top_k < p.shape[-1]:
        _, ids = ranked_topk(p, filters.top_k, static)
        keep = torch.zeros_like(p, dtype=torch.bool).scatter_(-1, ids, True)
        p = _renormalized(p, keep)
    if filters.top_p is not None:
        vals, ids = torch.sort(p, dim=-1, descending=True, stable=True)  # (prob desc, id asc)
        before = torch.cumsum(vals, -1) - vals  # mass of the better-ranked tokens
        keep_sorted = (before < float(filters.top_p)) & (vals > 0)
        keep = torch.zeros_like(keep_sorted).scatter_(-1, ids, keep_sorted)
        p = _renormalized(p, keep)
    if filters.min_p is not None:
        p = _renormalized(p, p >= float(filters.min_p) * p.amax(-1, keepdim=True))
    return p


NO_FILTERS = TargetFilters()


def target_law(
    logits: torch.Tensor, T: torch.Tensor, filters: TargetFilters = NO_FILTERS, static: bool = False
) -> torch.Tensor:
    """p_T with the target filters (docs/spec.md §0): logits [b, ..., V], T [b] -> probabilities.
    ``static``: no host sync (``ranked_topk``)."""
    _expect_law_inputs("target_law", logits, T)
    p = tempered(logits, T)
    return apply_filters(p, filters, static) if filters.active else p


def inverse_cdf(
    probs: torch.Tensor, u: torch.Tensor, out: torch.Tensor | None = None, static: bool = False
) -> torch.Tensor:
    """Index of the first entry whose cumulative mass exceeds u (docs/spec.md §7).

    probs: [..., n] nonnegative (unnormalized is fine with u scaled by the total); u: [...];
    out: [..., n] a buffer for the cumulative sums (optional). Zero-mass entries are never
    chosen; if rounding leaves the total below u, the last entry with mass wins. ``static``:
    no host sync (the fallback computed in every row).

    >>> inverse_cdf(torch.tensor([0.5, 0.0, 0.5]), torch.tensor(0.7)).item()
    2
    """
    expect("inverse_cdf", "probs", probs, "[..., n]", (..., None), "float")
    expect(
        "inverse_cdf", "u", u, "[...] (the shape of probs without its last dimension)", tuple(probs.shape[:-1]), "float"
    )
    cum = torch.cumsum(probs, -1, out=out) if out is not None else torch.cumsum(probs, -1)
    n = probs.shape[-1]
    idx = torch.searchsorted(cum, u.unsqueeze(-1).to(cum.dtype).contiguous(), right=True).squeeze(-1)
    # where rounding leaves u at or above the total (idx = n): the last entry with mass (a row
    # without mass: its last entry), found by a max over the positions with mass; ``static``:
    # always computed (no host sync), else only when some row needs it (one sync)
    if not static and not bool((idx >= n).any()):
        return idx
    last = torch.where(probs > 0, positions(n, probs.device), -1).amax(-1)
    return torch.where(idx < n, idx, torch.where(last >= 0, last, n - 1))


def target_weights(
    logits: torch.Tensor, T: torch.Tensor, filters: TargetFilters = NO_FILTERS
) -> tuple[torch.Tensor, torch.Tensor]:
    """p_T as (w [n, V], Z [n]) with p_T = w / Z, for the verifier's running residual
    (docs/spec.md §4 step 2): ``logits`` [n, V] is a copy the caller owns (the temperature
    is applied in place); T: [n]. Equals ``target_law``; the verifier keeps Z as it removes
    mass, so nothing is renormalized."""
    if filters.active or bool((T == 0).any()):
        p = target_law(logits, T, filters)
        return p, torch.ones_like(p[:, 0])
    if not bool((T == 1).all()):
        logits.div_(T.to(logits.dtype).unsqueeze(1))
    logits.sub_(logits.amax(-1, keepdim=True)).exp_()  # in place: no new [n, V] buffer
    return logits, logits.sum(-1)
