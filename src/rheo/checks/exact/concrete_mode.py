"""The concrete draws themselves (``rheo.checks.exact.concrete`` for the method): a
``TorchFunctionMode`` that answers torch's random calls with the values of the points the
enumerator chose, one per row of a batched call, and registers each draw's blocks (a
uniform, an exponential race's row, a categorical pick) in a ``Layout`` on first sight.

``torch.multinomial(probs, n, replacement=False)`` with n > 1 is one categorical block per row
whose options are the ordered n-tuples of distinct tokens (``ordered_tuples``: the same
indexing on every run), each weighted by its Plackett-Luce probability (``plackett_luce_table``:
torch's ordered draws without replacement, each pick w_j over the weight not drawn yet). For
example, weights (1/2, 1/2, 0) and n = 2 give (0, 1) and (1, 0) 1/2 each, every other tuple 0.
A row with fewer than n tokens of weight gets what torch gives it (torch 2.13 does not raise):
its tokens of weight in Plackett-Luce order, then tokens of weight 0 in the order torch's own
``topk`` puts its ties in (``_fill_order``).

Specification: docs/spec.md §7.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from rheo.checks.exact.precision import dtype_bits
from rheo.checks.exact.random_values import SCHEDULE_NEEDED, ScheduleChanged, Unsupported, call_site

MAX_OPTIONS = 64  # a randint over more values is not enumerated
MAX_TUPLES = 5040  # ordered n-tuples of a multinomial without replacement per row at most (as a race's orders)
DELTA = 1e-30  # the exponential that makes a race's token win (score w / DELTA)
_REFUSED = {
    "randn", "randn_like", "randperm", "normal", "normal_", "poisson", "random_", "cauchy_", "geometric_",
    "log_normal_", "binomial",
}  # fmt: skip
_DRAWS = {"rand", "rand_like", "uniform_", "exponential_", "randint", "randint_like", "multinomial"}
_DRAWS |= {"bernoulli", "bernoulli_"} | _REFUSED


class NotRowwise(Exception):
    """A batched call's draws are not ``rows`` equal slices of the single call's."""


class RaceRow:
    """A row of exponentials kept as runs of equal values: a race over a whole vocabulary is
    mostly one value (the tokens of no weight), and the enumeration remembers every point it
    ran. Compares, hashes and iterates as its values do; ``race_row`` makes one."""

    __slots__ = ("size", "runs", "_hash")

    def __init__(self, size: int, runs: tuple[tuple[int, float], ...]) -> None:
        self.size, self.runs = size, runs  # (start, value) per run, in order
        self._hash = hash((size, runs))

    def array(self) -> np.ndarray:
        out = np.empty(self.size, dtype=np.float64)
        ends = [start for start, _ in self.runs[1:]] + [self.size]
        for (start, value), end in zip(self.runs, ends):
            out[start:end] = value
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.array() if dtype is None else self.array().astype(dtype)

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        return iter(self.array().tolist())

    def __getitem__(self, i):
        return self.array()[i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RaceRow) and (self.size, self.runs) == (other.size, other.runs)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"RaceRow({self.size}, {len(self.runs)} runs)"


def race_row(values: Any) -> tuple[float, ...] | RaceRow:
    """A race's row of values for a point: runs (``RaceRow``) where they are few, else a tuple."""
    if isinstance(values, RaceRow):
        return values
    a = np.asarray(values, dtype=np.float64).reshape(-1)
    starts = np.concatenate([[0], np.flatnonzero(a[1:] != a[:-1]) + 1]) if len(a) else np.zeros(0, dtype=np.int64)
    if len(a) < 64 or len(starts) * 8 > len(a):
        return tuple(a.tolist())
    return RaceRow(len(a), tuple(zip(starts.tolist(), a[starts].tolist())))


def dense(values: Any) -> np.ndarray:
    """A race's row of values as an array (a ``RaceRow`` or a sequence)."""
    return values.array() if isinstance(values, RaceRow) else np.asarray(values, dtype=np.float64)


@dataclass
class Block:
    """One unit of randomness: a uniform, an exponential race's row, or a categorical pick."""

    id: int
    kind: str  # "u" | "race" | "cat"
    size: int  # 1 for "u"; the row's length for "race"; the number of options for "cat"
    site: str
    what: str  # the draw, e.g. "Tensor.exponential_"
    grid: int = 53  # "u": the generator's grid in bits; "race": the float bits of the tensor
    weights: list[float] | None = None  # "cat" with fixed weights (randint); else seen per run
    row: tuple[int, ...] = ()  # "u": the blocks of its row (the last dimension of its draw), itself included

    def default(self) -> Any:
        if self.kind == "u":
            return 1 << (self.grid - 1)  # grid index of 0.5
        if self.kind == "race":
            return race_row([1.0] * self.size)
        return None  # "cat": the option of largest weight seen in the run

    def name(self) -> str:
        return f"{self.what} at {self.site}"

    def u(self, v: int) -> float:
        """A uniform block's value: its grid index ``v`` over 2^grid."""
        return v / 2.0**self.grid


@dataclass
class Draw:
    kind: str
    shape: tuple[int, ...]  # one row's
    blocks: list[int]
    what: str


@dataclass
class Run:
    """What one evaluation saw besides its output: the weights each categorical block had."""

    output: Any
    weights: dict[int, list[float]] = field(default_factory=dict)


class ConcreteMode(TorchFunctionMode):
    """While active, torch's random calls are answered with the values of ``points`` (one per
    row of a batched call), drawn blocks registered in ``layout`` on first sight."""

    def __init__(self, layout: Layout, points: list[dict[int, Any]], rows: int) -> None:
        super().__init__()
        self.layout, self.points, self.rows = layout, points, rows
        self.n = 0  # draws made so far in this call
        self.weights: list[dict[int, list[float]]] = [{} for _ in points]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name not in _DRAWS:
            return func(*args, **kwargs)
        if name in _REFUSED:
            raise Unsupported(f"torch.{name} at {call_site()}: exact certification follows uniforms, exponentials and "
                              "categorical draws only")  # fmt: skip
        if name in ("rand", "rand_like"):
            out = func(*args, **kwargs)
            self._fill(out, "u", "torch." + name, lambda b, v: b.u(v))
            return out
        if name == "uniform_":
            a = float(args[1] if len(args) > 1 else kwargs.get("from", 0.0))
            b_ = float(args[2] if len(args) > 2 else kwargs.get("to", 1.0))
            out = func(*args, **kwargs)
            self._fill(out, "u", "Tensor.uniform_", lambda b, v: a + (b_ - a) * b.u(v))
            return out
        if name == "exponential_":
            lambd = float(args[1] if len(args) > 1 else kwargs.get("lambd", 1.0))
            out = func(*args, **kwargs)
            self._fill(out, "race", "Tensor.exponential_", lambda b, v: 0.0, scale=1 / lambd)
            return out
        if name in ("randint", "randint_like"):
            return self._randint(func, name, args, kwargs)
        if name == "multinomial":
            return self._multinomial(args, kwargs)
        return self._bernoulli(func, name, args, kwargs)

    # ---- the draws ----

    def _draw(self, kind: str, shape: tuple[int, ...], what: str, make: Callable[[int, str], Block]) -> Draw:
        """The call's next draw: registered on first sight, checked against the layout after."""
        if self.rows > 1:
            if not shape or shape[0] % self.rows:
                raise NotRowwise(what)
            shape = (shape[0] // self.rows, *shape[1:])
        draws = self.layout.draws
        if self.n < len(draws):
            d = draws[self.n]
            if (d.kind, d.shape, d.what) != (kind, shape, what):
                if self.rows > 1:
                    raise NotRowwise(what)
                raise ScheduleChanged(
                    f"{what} at {call_site()}: the draws change with the values drawn before (draw {self.n} was "
                    f"{d.what} of shape {list(d.shape)}, now {what} of shape {list(shape)}): {SCHEDULE_NEEDED}"
                )
        else:
            if self.rows > 1:
                raise NotRowwise(what)
            site = call_site()
            per_row = kind in ("race", "tuple")  # one block per row of the last dimension
            n_blocks = int(np.prod(shape[:-1])) if per_row and shape else int(np.prod(shape))
            d = Draw(kind, shape, [], what)
            for _ in range(n_blocks):
                d.blocks.append(self.layout.add(make, site))
            if kind == "u":  # a row of uniforms may be a race (rheo.checks.exact.concrete): each knows its row
                width = shape[-1] if shape else 1
                for i in range(0, len(d.blocks), max(1, width)):
                    row = tuple(d.blocks[i : i + width])
                    for bid in row:
                        self.layout.blocks[bid].row = row
            draws.append(d)
        self.n += 1
        return d

    def _fill(self, out: torch.Tensor, kind: str, what: str, value: Callable[[Block, Any], float], scale: float = 1.0):
        """Write the points' values of the draw into ``out``: ``value(block, v)`` for a uniform,
        the row of exponentials (times ``scale``) for a race. A lone exponential (a row of one)
        is a uniform u, mapped to -log(1 - u) * scale."""
        shape = tuple(out.shape)
        if kind == "race" and (not shape or shape[-1] == 1):
            kind, value = "u", lambda b, v: -math.log1p(-b.u(v)) * scale
        bits = dtype_bits(out.dtype)

        def make(i: int, site: str) -> Block:
            return Block(i, kind, 1 if kind == "u" else shape[-1], site, what, grid=bits)

        d = self._draw(kind, shape, what, make)
        if kind == "race":  # rows of exponentials: as arrays (a row may be a whole vocabulary)
            rows = [
                dense(point.get(bid, self.layout.blocks[bid].default())) * scale
                for point in self.points
                for bid in d.blocks
            ]
            filled = torch.from_numpy(np.concatenate(rows) if rows else np.zeros(0))
        else:
            vals = [value(self.layout.blocks[bid], point.get(bid, self.layout.blocks[bid].default()))
                    for point in self.points for bid in d.blocks]  # fmt: skip
            filled = torch.tensor(vals, dtype=torch.float64)
        with torch._C.DisableTorchFunctionSubclass():
            out.copy_(filled.reshape(out.shape).to(out.dtype))

    def _cat_values(self, d: Draw, rows_weights: list[list[float]]) -> list[int]:
        """Each point's option for each block of draw ``d`` (weights per block, in order)."""
        out = []
        per = len(d.blocks)
        for r, point in enumerate(self.points):
            for j, bid in enumerate(d.blocks):
                w = rows_weights[r * per + j]
                self.weights[r][bid] = w
                v = point.get(bid)
                if v is None or not 0 <= v < len(w) or w[v] <= 0:
                    v = int(np.argmax(w))
                out.append(v)
        return out

    def _randint(self, func: Any, name: str, args: tuple, kwargs: dict) -> torch.Tensor:
        out = func(*args, **kwargs)
        if name == "randint":
            nums = [a for a in args if isinstance(a, int)]
            low, high = (0, nums[0]) if len(nums) == 1 else (nums[0], nums[1])
            low, high = int(kwargs.get("low", low)), int(kwargs.get("high", high))
        else:
            nums = [a for a in args[1:] if isinstance(a, int)]
            low, high = (0, nums[0]) if len(nums) == 1 else (nums[0], nums[1])
        span = high - low
        if span > MAX_OPTIONS:
            raise Unsupported(
                f"torch.{name} over {span} values at {call_site()}: too many to enumerate; such a draw seeds another "
                "generator (a fused kernel's), whose draws exact certification cannot follow. Use the engine's "
                "unseeded or native sampling path (for vLLM's CPU build: the native sampler, forward_native)"
            )
        shape = tuple(out.shape)

        def make(i: int, site: str) -> Block:
            return Block(i, "cat", span, site, f"torch.{name}", weights=[1.0] * span)

        d = self._draw("cat", shape, f"torch.{name}", make)
        picks = self._cat_values(d, [[1.0] * span] * (len(d.blocks) * len(self.points)))
        with torch._C.DisableTorchFunctionSubclass():
            out.copy_(torch.tensor([low + p for p in picks], dtype=out.dtype).reshape(out.shape))
        return out

    def _multinomial(self, args: tuple, kwargs: dict) -> torch.Tensor:
        probs = args[0] if args else kwargs["input"]
        n = int(args[1] if len(args) > 1 else kwargs.get("num_samples", 1))
        replacement = bool(args[2] if len(args) > 2 else kwargs.get("replacement", False))
        with torch._C.DisableTorchFunctionSubclass():
            rows = probs.detach().double().cpu().reshape(-1, probs.shape[-1])
        if bool((rows < 0).any()) or not bool(torch.isfinite(rows).all()) or bool((rows.sum(-1) <= 0).any()):
            raise RuntimeError("multinomial: invalid probability distribution (the gate's stand-in refuses it too)")
        V = probs.shape[-1]
        if n > 1 and not replacement:
            return self._without_replacement(probs, rows, n)
        shape = (*probs.shape[:-1], n)

        def make(i: int, site: str) -> Block:
            return Block(i, "cat", V, site, "torch.multinomial")

        d = self._draw("cat", shape, "torch.multinomial", make)
        ws = [self.layout.law(row) for row in rows.numpy() for _ in range(n)]
        picks = self._cat_values(d, ws)
        return torch.tensor(picks, dtype=torch.long, device=probs.device).reshape(shape)

    def _without_replacement(self, probs: torch.Tensor, rows: torch.Tensor, n: int) -> torch.Tensor:
        """``torch.multinomial(probs, n, replacement=False)``, n > 1: one categorical block per
        row over the ordered n-tuples of distinct tokens, weighted by Plackett-Luce (the module
        docstring). probs: [..., V]; rows: [R, V] float64, valid; returns [..., n]."""
        V = probs.shape[-1]
        if n > V:
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        count = math.perm(V, n)
        if count > MAX_TUPLES:
            raise Unsupported(
                f"torch.multinomial without replacement of n = {n} from V = {V} at {call_site()}: {count} ordered "
                f"draws per row, more than the {MAX_TUPLES} exact certification enumerates. Draw the {n} tokens with "
                "a Gumbel-top-k race over torch.rand keys (topk of log q - log(-log u)), which it reads as a race "
                f"over the tokens with weight only, or keep V!/(V - n)! <= {MAX_TUPLES} ({_within(n)})"
            )
        table = ordered_tuples(V, n)
        what = "torch.multinomial without replacement"
        shape = (*probs.shape[:-1], n)

        def make(i: int, site: str) -> Block:
            return Block(i, "cat", count, site, what)

        d = self._draw("tuple", shape, what, make)
        if self.layout.blocks[d.blocks[0]].size != count:
            raise ScheduleChanged(
                f"{what} at {call_site()}: the draw changes with the values drawn before (over "
                f"{self.layout.blocks[d.blocks[0]].size} ordered tuples, now {count}): {SCHEDULE_NEEDED}"
            )
        ws = [plackett_luce_table(tuple(r), n, probs.dtype, probs.device) for r in rows.tolist()]
        picks = self._cat_values(d, ws)
        return torch.tensor(table[picks], dtype=torch.long, device=probs.device).reshape(shape)

    def _bernoulli(self, func: Any, name: str, args: tuple, kwargs: dict) -> torch.Tensor:
        target = args[0]
        if name == "bernoulli_":
            p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
        else:
            p = args[1] if len(args) > 1 else kwargs.get("p", target)
        with torch._C.DisableTorchFunctionSubclass():
            probs = torch.broadcast_to(torch.as_tensor(p, dtype=torch.float64), target.shape).reshape(-1).tolist()
        shape = tuple(target.shape)

        def make(i: int, site: str) -> Block:
            return Block(i, "cat", 2, site, f"torch.{name}")

        d = self._draw("cat", shape, f"torch.{name}", make)
        picks = self._cat_values(d, [[1 - x, x] for x in probs])
        out = torch.tensor(picks, dtype=target.dtype, device=target.device).reshape(target.shape)
        if name == "bernoulli_":
            with torch._C.DisableTorchFunctionSubclass():
                target.copy_(out)
            return target
        return out


class Layout:
    """The draws of one call and their blocks, in draw order (the same on every run)."""

    def __init__(self) -> None:
        self.draws: list[Draw] = []
        self.blocks: list[Block] = []
        self.laws: dict[bytes, list[float]] = {}  # a categorical's weights, one list per distinct row

    def law(self, row: np.ndarray) -> list[float]:
        """``row`` as a list, the same list for equal rows (every run remembers its weights: over
        a whole vocabulary a list each would fill the memory)."""
        key = row.tobytes()
        if key not in self.laws:
            self.laws[key] = row.tolist()
        return self.laws[key]

    def add(self, make: Callable[[int, str], Block], site: str) -> int:
        b = make(len(self.blocks), site)
        self.blocks.append(b)
        return b.id


@functools.lru_cache(maxsize=32)
def ordered_tuples(V: int, n: int) -> np.ndarray:
    """The options of a multinomial without replacement: every ordered n-tuple of distinct
    tokens of V, in ``itertools.permutations`` order (option i is the same tuple on every
    run). ordered_tuples(3, 2) = [[0, 1], [0, 2], [1, 0], [1, 2], [2, 0], [2, 1]]; [P, n]."""
    out = np.array(list(itertools.permutations(range(V), n)), dtype=np.int64).reshape(-1, n)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=32)
def _tuple_index(V: int, n: int) -> dict[tuple[int, ...], int]:
    return {tuple(t): i for i, t in enumerate(ordered_tuples(V, n).tolist())}


def _within(n: int) -> str:
    """Which V a draw of n without replacement may have under MAX_TUPLES, in words."""
    v = n
    while math.perm(v + 1, n) <= MAX_TUPLES:
        v += 1
    return f"V <= {v} for n = {n}" if math.perm(v, n) <= MAX_TUPLES else f"n <= 7: n = {n} is too many at any V"


@functools.lru_cache(maxsize=256)
def plackett_luce_table(weights: tuple[float, ...], n: int, dtype: torch.dtype, device: torch.device) -> list[float]:
    """Each ordered n-tuple's probability (``ordered_tuples`` order) under torch's draw of n
    tokens without replacement from ``weights`` ([V], non-negative, some > 0):
    prod_k w[t_k] / (the weight not drawn before place k). Each weight left is summed afresh
    (no subtraction, so a tiny tail keeps its relative precision). A row with m < n tokens of
    weight puts each order of those on the one tuple torch returns for it (``_fill_order``:
    its zero-weight places in the order torch's topk on probs' ``dtype`` and ``device`` gives
    them). Cached: runs with the same row share one list (do not modify it).

    plackett_luce_table((0.5, 0.3, 0.2), 2, ...)[0] = P((0, 1)) = 0.5 * 0.3 / 0.5 = 0.3."""
    row = np.asarray(weights, dtype=np.float64)
    V = len(row)
    live = [j for j in range(V) if row[j] > 0]
    if len(live) < n:
        out = [0.0] * math.perm(V, n)
        index = _tuple_index(V, n)
        for order in itertools.permutations(live):
            p, left = 1.0, [row[j] for j in live]
            for j in order:
                p *= row[j] / math.fsum(left)
                left.remove(row[j])
            out[index[_fill_order(order, n, V, dtype, device)]] += p
        return out
    table = ordered_tuples(V, n)
    rest = np.broadcast_to(row, (len(table), V)).copy()
    ratio = np.empty(table.shape)
    for k in range(n):
        picked = row[table[:, k]]
        left = rest.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio[:, k] = np.where(picked > 0, picked / left, 0.0)
        rest[np.arange(len(table)), table[:, k]] = 0.0
    return ratio.prod(axis=1).tolist()


def _fill_order(order: tuple[int, ...], n: int, V: int, dtype: torch.dtype, device: torch.device) -> tuple[int, ...]:
    """What torch.multinomial(probs, n, replacement=False) returns when the tokens of weight
    (fewer than n) finish in ``order``: torch takes topk(w / E, n) (E exponential), where the
    tokens of weight 0 tie at 0. The same topk on keys with the same order (the tokens of
    ``order`` at m, m - 1, ..., 1; the rest 0) picks the same ties in the same places."""
    keys = torch.zeros(V, dtype=dtype, device=device)
    for r, j in enumerate(order):
        keys[j] = len(order) - r
    return tuple(int(i) for i in torch.topk(keys, n).indices.tolist())
