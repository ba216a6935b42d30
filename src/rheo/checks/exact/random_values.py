"""Random values the gate can follow (``rheo.checks.exact.tracer`` runs an implementation with
them): a ``Trace`` of the answers given so far, ``SymScalar`` (a random Python number: a
variable in an interval, mapped by the implementation's own monotone operations), and the
stand-ins for Python's ``random`` and NumPy's generators. torch's are in
``rheo.checks.exact.random_values_torch``.

Specification: docs/spec.md §7.
"""

from __future__ import annotations

import math
import os
import random as _random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import numpy as np

from rheo.checks.exact.cuts import Near, below, cut_at
from rheo.checks.exact.precision import dtype_bits, note_weights, operand_bits

_HERE = os.path.dirname(os.path.abspath(__file__))


# why a run whose draws change with the values drawn is refused (rheo.checks.exact.concrete)
SCHEDULE_NEEDED = (
    'exact certification needs the same draws on every run (docs/adapters.md, "Your randomness: one fixed '
    'schedule": draw one row per node slot up front, not one per node visited)'
)


class Unsupported(Exception):
    """The implementation uses its randomness in a way this check cannot follow exactly."""


class ScheduleChanged(Unsupported):
    """The number of draws changed with the values drawn (``SCHEDULE_NEEDED``): every case of
    the same implementation would be refused the same way after its own search."""


class _Branch(Exception):
    def __init__(self, options: tuple[tuple[int, str], ...]) -> None:
        self.options = options


_SKIPPED: dict[str, bool] = {}  # code file name -> whether call_site looks past its frames
_SHOWN: dict[tuple[str, str], str] = {}  # (code file name, working folder) -> the path call_site shows


def _skipped(filename: str) -> bool:
    skip = _SKIPPED.get(filename)
    if skip is None:
        path = os.path.abspath(filename)
        skip = (
            path.startswith(_HERE)
            or any(s in path for s in (f"{os.sep}torch{os.sep}", f"{os.sep}numpy{os.sep}"))
            or path.endswith(("contextlib.py", "random.py"))
        )
        _SKIPPED[filename] = skip
    return skip


def call_site() -> str:
    """file:line of the innermost frame outside rheo.checks, torch and numpy: the
    implementation's line that made the current call. (The frames are walked directly, the
    same answer as ``traceback.extract_stack`` without reading source lines: it is in every
    fingerprint of a torch draw.)"""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not _skipped(name):
            cwd = os.getcwd()
            shown = _SHOWN.get((name, cwd))
            if shown is None:
                path = os.path.abspath(name)
                rel = os.path.relpath(path)
                shown = _SHOWN[(name, cwd)] = path if rel.startswith("..") else rel
            return f"{shown}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def unsupported(what: str) -> Unsupported:
    return Unsupported(f"{what} (at {call_site()})")


_BOTH = [0, 1]


@dataclass
class Trace:
    """One run's randomness: the script of answers to replay, the variables drawn so far
    (each with its interval in [0, 1)), and the probability of the answers given.

    ``script`` is a tuple of (option index, fingerprint): a replay whose choice point has
    another fingerprint was not deterministic given its draws. With ``rng`` (probe mode)
    every unscripted choice is answered at random, with its weight, instead of branching.

    ``prob`` is the *ideal* probability (u continuous); ``prob_backend`` the *backend* one,
    with each variable on its generator's grid k / 2^bits (24 bits for a float32
    ``torch.rand``, 53 for Python's and NumPy's float64 draws): there ``u <= 0`` has
    probability 2^-bits, not 0.
    """

    script: tuple[tuple[int, str], ...] = ()
    rng: np.random.Generator | None = None
    prob: float = 1.0
    prob_backend: float = 1.0
    pos: int = 0
    taken: list[tuple[int, str]] = field(default_factory=list)
    intervals: list[list[float]] = field(default_factory=list)
    values: list[float] = field(default_factory=list)  # probe mode: each variable's concrete value
    origins: list[str] = field(default_factory=list)
    grids: list[int] = field(default_factory=list)  # each variable's generator grid, in bits
    bits: int = 53  # mantissa bits of the lowest precision that met a random value (rheo.checks.exact.precision)
    bits_from: str = ""  # where that precision came from and where it met the randomness
    draws: int = 0
    # one-pass enumeration (``tracer.enumerate_runs``, method "fast"): an unscripted choice takes
    # its first option and leaves the others, as scripts, in ``pending`` (one group per choice)
    # instead of raising _Branch; ``memo`` holds every split's cut by (split number, choices
    # taken before it, variable, interval, fingerprint), shared by the runs of one enumeration
    near_cuts: bool = False  # look for a cut beside the threshold first (``_cut``)
    pending: list[list[tuple[tuple[int, str], ...]]] | None = None
    memo: dict[tuple, tuple] | None = None
    splits: int = 0
    raced: set[int] = field(default_factory=set)  # variables a race consumed: compared no more
    chosen: list[tuple[tuple[float, ...], int, str]] = field(
        default_factory=list
    )  # the witness: each choice's weights, option and fingerprint

    def restart(self, script: tuple[tuple[int, str], ...]) -> None:
        """Ready for the next run of one enumeration (its pending scripts and memo kept apart)."""
        self.script, self.prob, self.prob_backend, self.pos = script, 1.0, 1.0, 0
        self.taken, self.intervals, self.values, self.origins, self.grids = [], [], [], [], []
        self.bits, self.bits_from, self.draws, self.splits = 53, "", 0, 0
        self.raced = set()
        self.chosen = []
        if self.pending is not None:
            self.pending = []

    def new_var(self, origin: str, grid: int = 53) -> int:
        self.intervals.append([0.0, 1.0])
        self.grids.append(grid)
        self.values.append(float(self.rng.random()) if self.rng is not None else 0.5)
        self.origins.append(origin)
        self.draws += 1
        return len(self.intervals) - 1

    def choose(
        self, fingerprint: str, weights: list[float], forced: int | None = None, backend: list[int] | None = None
    ) -> int:
        """Pick an option index; options of weight 0 are never picked. Replays the script,
        raises _Branch at the first unscripted choice (enumeration), or answers at random
        (probe mode; ``forced`` is the answer the probe's concrete values give).
        ``backend``: the options' grid-point counts, for ``prob_backend``."""
        if len(weights) == 2 and weights[0] > 0 and weights[1] > 0:  # a split's two sides: both live
            live, total = _BOTH, float(weights[0] + weights[1])
        else:
            live = [i for i, w in enumerate(weights) if w > 0]
            total = float(sum(weights[i] for i in live))
        if not live:
            raise unsupported(f"{fingerprint}: every option has weight 0")
        if len(live) == 1:
            self._backend(live[0], weights, total, backend)
            return live[0]
        if self.pos < len(self.script):
            i, fp = self.script[self.pos]
            if fp != fingerprint:
                raise unsupported(
                    f"the implementation is not deterministic given its random draws: choice {self.pos} was "
                    f"{fp!r} and is now {fingerprint!r} on replay"
                )
        elif self.rng is not None:
            if forced is None:
                p = np.array([weights[i] / total for i in live])
                forced = live[int(self.rng.choice(len(live), p=p / p.sum()))]
            i = forced
        elif self.pending is not None:  # one pass: the first option now, the others replayed later
            prefix = tuple(self.taken)
            self.pending.append([prefix + ((j, fingerprint),) for j in live[1:]])
            i = live[0]
        else:
            raise _Branch(tuple((j, fingerprint) for j in live))
        self.pos += 1
        self.taken.append((i, fingerprint))
        self.chosen.append((tuple(float(weights[j]) for j in live), live.index(i), fingerprint))
        self.prob *= weights[i] / total
        self._backend(i, weights, total, backend)
        return i

    def _backend(self, i: int, weights: list[float], total: float, backend: list[int] | None) -> None:
        if backend is None:
            self.prob_backend *= weights[i] / total
        else:
            points = sum(backend)
            self.prob_backend *= backend[i] / points if points else 0.0

    def split(self, var: int, truth: Callable[[float], bool], fingerprint: str, near: Near = None) -> bool:
        """The answer of a comparison that depends on variable ``var`` only, as a function
        ``truth(u)`` that must be monotone in u (a step at one cut). Branches when both
        answers occur in the variable's interval. ``near`` (with ``near_cuts``): gives the
        threshold the plain uniform is compared with; the cut is looked for beside it first."""
        if var in self.raced:
            raise unsupported(
                f"{fingerprint}: a random value compared after a race over it (its law is no longer uniform)"
            )
        lo, hi = self.intervals[var]
        memo, hit = self.memo, None
        key: tuple = ()
        if memo is not None:  # the same split met again on replay: its cut is known
            key = (self.splits, tuple(self.taken), var, lo, hi, fingerprint)
            self.splits += 1
            hit = memo.get(key)
        if hit is None:
            with np.errstate(all="ignore"):  # log(0) and the like at the interval's ends are the implementation's
                hit = self._cut(var, truth, fingerprint, near if self.near_cuts else None)
            if memo is not None:
                memo[key] = hit
        t_lo, cut = hit
        if cut is None:
            return t_lo
        return self._take(var, t_lo, cut, fingerprint)

    def _cut(self, var: int, truth: Callable[[float], bool], fingerprint: str, near: Near) -> tuple:
        """(truth at the interval's low end, the cut or None when the answer is the same
        throughout)."""
        lo, hi = self.intervals[var]
        t_lo, t_hi = bool(truth(lo)), bool(truth(below(hi)))
        if t_lo == t_hi:
            if self.rng is not None and bool(truth(self.values[var])) != t_lo:
                raise unsupported(f"{fingerprint}: the comparison is not monotone in the random value")
            return t_lo, None
        return t_lo, cut_at(truth, lo, hi, t_lo, near)

    def _take(self, var: int, t_lo: bool, cut: float, fingerprint: str) -> bool:
        lo, hi = self.intervals[var]
        forced = None if self.rng is None else int(self.values[var] >= cut)
        scale = 2.0 ** self.grids[var]  # grid points k / scale below x: ceil(x * scale), exact in floats
        n_lo, n_cut, n_hi = math.ceil(lo * scale), math.ceil(cut * scale), math.ceil(hi * scale)
        i = self.choose(fingerprint, [cut - lo, hi - cut], forced, [n_cut - n_lo, n_hi - n_cut])
        self.intervals[var] = [lo, cut] if i == 0 else [cut, hi]
        return t_lo if i == 0 else not t_lo

    def categorical(self, weights: list[float], fingerprint: str) -> int:
        self.draws += 1
        return self.choose(fingerprint, weights)

    def note_bits(self, bits: int, origin: str, reached: str) -> None:
        """A value of ``bits`` mantissa bits (made where ``origin`` says) met a random value
        (``reached``: what it was, e.g. "a threshold"); the run keeps the lowest."""
        if bits < self.bits:
            self.bits = bits
            self.bits_from = f"{origin or 'a value of that precision'}, reaching {reached} at {call_site()}"

    def note_operand(self, x: Any, reached: str) -> None:
        """``note_bits`` for a value that meets a random value (``precision.operand_bits``)."""
        bits, origin = operand_bits(x)
        if bits < self.bits:
            self.note_bits(bits, origin, reached)

    def note_dtype(self, dtype: object, reached: str = "a threshold") -> None:
        bits = dtype_bits(dtype)
        if bits < self.bits:
            self.note_bits(bits, f"a {str(dtype).replace('torch.', '')} operand", reached)


# ---- Python scalars: random.random(), Generator.random(), tensor.item() ----

_CMP = {
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}
_REFLECT = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
_NP_CMP = {"less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge"}
_NP_MONOTONE = {"log", "log1p", "log2", "log10", "exp", "expm1", "exp2", "sqrt", "negative", "positive", "reciprocal"}
_NP_ARITHMETIC = {"add", "subtract", "multiply", "true_divide", "divide"}


def _near(sym: SymScalar, other: Any) -> Near:
    """The threshold a plain uniform is compared with, as a float, when asked (``Trace.split``)."""
    if not sym.plain or not sym.trace.near_cuts:
        return None

    def value() -> float | None:
        if hasattr(other, "_rheo_trace"):
            return None
        if not isinstance(other, (int, float, np.generic)) and getattr(other, "ndim", None) != 0:
            return None
        try:
            return float(other)
        except (TypeError, ValueError, RuntimeError):
            return None

    return value


class SymScalar:
    """A random Python number: variable ``var`` mapped by ``f`` (monotone)."""

    def __init__(self, trace: Trace, var: int, f: Callable[[float], Any], what: str, plain: bool = False) -> None:
        self.trace, self.var, self.f, self.what = trace, var, f, what
        self.plain = plain  # f is the identity: the uniform itself

    def _map(self, g: Callable[[Any], Any], what: str) -> SymScalar:
        f = self.f
        return SymScalar(self.trace, self.var, lambda u: g(f(u)), what)

    def _cmp(self, other: Any, op: str) -> Any:
        if isinstance(other, SymScalar):
            if other.var != self.var:
                raise unsupported(f"two random values compared with each other ({self.what} {op} {other.what})")
            return _CMP[op](self.f(self.trace.values[self.var]), other.f(self.trace.values[self.var]))
        if isinstance(other, (list, tuple)):
            other = np.asarray(other)
        if isinstance(other, np.ndarray) and other.ndim > 0:
            flat = [self._cmp(x, op) for x in other.reshape(-1)]
            return np.array(flat, dtype=bool).reshape(other.shape)
        self.trace.note_operand(other, "a threshold")
        if getattr(other, "dtype", None) is not None and getattr(other, "ndim", 0) > 0:
            return NotImplemented  # a tensor: handled elementwise by __torch_function__
        f, cmp = self.f, _CMP[op]
        return self.trace.split(self.var, lambda u: bool(cmp(f(u), other)), f"{op} {self.what}", _near(self, other))

    def __lt__(self, o: Any) -> Any:
        return self._cmp(o, "lt")

    def __le__(self, o: Any) -> Any:
        return self._cmp(o, "le")

    def __gt__(self, o: Any) -> Any:
        return self._cmp(o, "gt")

    def __ge__(self, o: Any) -> Any:
        return self._cmp(o, "ge")

    def _const(self, o: Any) -> Any:
        if isinstance(o, SymScalar):
            raise unsupported(f"arithmetic on two random values ({self.what}, {o.what})")
        self.trace.note_operand(o, "the map of a random value")
        return o

    def __add__(self, o: Any) -> SymScalar:
        o = self._const(o)
        return self._map(lambda x: x + o, self.what)

    __radd__ = __add__

    def __sub__(self, o: Any) -> SymScalar:
        o = self._const(o)
        return self._map(lambda x: x - o, self.what)

    def __rsub__(self, o: Any) -> SymScalar:
        o = self._const(o)
        return self._map(lambda x: o - x, self.what)

    def __mul__(self, o: Any) -> SymScalar:
        o = self._const(o)
        return self._map(lambda x: x * o, self.what)

    __rmul__ = __mul__

    def __truediv__(self, o: Any) -> SymScalar:
        o = self._const(o)
        return self._map(lambda x: x / o, self.what)

    def __rtruediv__(self, o: Any) -> SymScalar:
        o = self._const(o)
        return self._map(lambda x: o / x, self.what)

    def __neg__(self) -> SymScalar:
        return self._map(lambda x: -x, self.what)

    def __pos__(self) -> SymScalar:
        return self

    def _escape(self, how: str) -> Any:
        raise unsupported(f"{how} of a random value from {self.what}: the check cannot follow it past that")

    def __float__(self) -> float:
        return self._escape("float()")

    def __int__(self) -> int:
        return self._escape("int()")

    def __index__(self) -> int:
        return self._escape("an index")

    def __bool__(self) -> bool:
        return self._escape("bool()")

    def __round__(self, n: int | None = None) -> Any:
        return self._escape("round()")

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"<random value {self.what}, variable {self.var}>"

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy ufuncs: comparisons (``arr < u``, ``np.float32(p) >= u``) split the interval;
        monotone maps (``np.log(u)``, ``np.exp``, ``np.sqrt``, ``1 - u``, ``u * c``) are
        followed; anything else is refused with its line."""
        name = ufunc.__name__
        if method != "__call__" or kwargs:
            raise unsupported(f"numpy.{name}.{method} of a random value from {self.what}")
        syms = [x for x in inputs if isinstance(x, SymScalar)]
        if len(syms) > 1 and len({s.var for s in syms}) > 1:
            raise unsupported(f"numpy.{name} of two random values")
        if name in _NP_CMP and len(inputs) == 2:
            a, b = inputs
            return a._cmp(b, _NP_CMP[name]) if a is self else self._cmp(a, _REFLECT[_NP_CMP[name]])
        if len(inputs) == 1 and name in _NP_MONOTONE:
            return self._map(ufunc, f"{name}({self.what})")
        if len(inputs) == 2 and name in _NP_ARITHMETIC:
            i = 0 if inputs[0] is self else 1
            other = inputs[1 - i]
            if isinstance(other, np.ndarray) and other.ndim > 0:
                out = np.empty(other.shape, dtype=object)
                for idx in np.ndindex(*other.shape):
                    out[idx] = self.__array_ufunc__(
                        ufunc, method, *((self, other[idx]) if i == 0 else (other[idx], self))
                    )
                return out
            return self._map((lambda x: ufunc(x, other)) if i == 0 else (lambda x: ufunc(other, x)), self.what)
        raise unsupported(f"numpy.{name} of a random value from {self.what}")

    # the methods NumPy calls on the elements of an object array (np.log(rng.random(3)))
    def log(self) -> SymScalar:
        return self._map(np.log, f"log({self.what})")

    def log1p(self) -> SymScalar:
        return self._map(np.log1p, f"log1p({self.what})")

    def exp(self) -> SymScalar:
        return self._map(np.exp, f"exp({self.what})")

    def sqrt(self) -> SymScalar:
        return self._map(np.sqrt, f"sqrt({self.what})")

    def __array_function__(self, func, types, args, kwargs):
        """``numpy.searchsorted(cdf, u)``: the inverse CDF, one step at a time."""
        if func is np.searchsorted and len(args) >= 2 and args[1] is self:
            a = np.asarray(args[0])
            side = kwargs.get("side", args[2] if len(args) > 2 else "left")
            self.trace.note_operand(a, "an inverse CDF")
            f, j = self.f, 0

            def above(j: int) -> Callable[[float], bool]:
                return lambda u: int(np.searchsorted(a, f(u), side=side)) > j

            while j < len(a) and self.trace.split(self.var, above(j), f"searchsorted {self.what} > {j}"):
                j += 1
            return np.intp(j)
        raise unsupported(f"numpy.{func.__name__} of a random value from {self.what}")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """``tensor >= u`` and ``torch.le(u, tensor)``: elementwise over the tensor."""
        name = getattr(func, "__name__", str(func)).strip("_")
        name = {"less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge"}.get(name, name)
        if name not in _CMP or kwargs:
            raise unsupported(f"torch {name} with a Python random value")
        a, b = args
        sym, other, op = (a, b, name) if isinstance(a, SymScalar) else (b, a, _REFLECT[name])
        import torch  # only reached when the implementation already uses torch

        sym.trace.note_operand(other, "a threshold")

        def against(x: Any) -> Callable[[float], bool]:
            return lambda u: bool(_CMP[op](sym.f(u), x))

        out = [sym.trace.split(sym.var, against(x), f"{op} {sym.what}") for x in other.reshape(-1)]
        return torch.tensor(out, dtype=torch.bool, device=other.device).reshape(other.shape)


# ---- NumPy and Python random replacements ----


def _sym_uniform(trace: Trace, origin: str, low: Any = 0.0, high: Any = 1.0) -> SymScalar:
    var = trace.new_var(origin)
    if low == 0.0 and high == 1.0:
        return SymScalar(trace, var, lambda u: u, origin, plain=True)
    return SymScalar(trace, var, lambda u: low + (high - low) * u, origin)


def _sized(make: Callable[[], Any], size: Any) -> Any:
    if size is None:
        return make()
    shape = (size,) if isinstance(size, int) else tuple(size)
    out = np.empty(shape, dtype=object)
    for idx in np.ndindex(*shape):
        out[idx] = make()
    return out


def _categorical(trace: Trace, weights: Any, origin: str) -> int:
    note_weights(trace, weights)
    w = [float(x) for x in np.asarray(weights, dtype=np.float64).reshape(-1)]
    if any(not math.isfinite(x) or x < 0 for x in w) or sum(w) <= 0:  # the real call raises too
        raise ValueError(f"{origin}: probabilities must be finite, non-negative and not all 0, got {w}")
    return trace.categorical(w, f"{origin} over {len(w)}")


class SymGenerator:
    """Stands in for ``numpy.random.Generator`` / ``RandomState`` (any seed)."""

    def __init__(self, trace: Trace, *args: Any, **kwargs: Any) -> None:
        self._trace = trace

    def random(self, size: Any = None, dtype: Any = None, out: Any = None) -> Any:
        return _sized(lambda: _sym_uniform(self._trace, "numpy random"), size)

    random_sample = random

    def rand(self, *shape: int) -> Any:
        return self.random(shape or None)

    def uniform(self, low: Any = 0.0, high: Any = 1.0, size: Any = None) -> Any:
        return _sized(lambda: _sym_uniform(self._trace, "numpy uniform", low, high), size)

    def exponential(self, scale: Any = 1.0, size: Any = None) -> Any:
        def make() -> SymScalar:
            var = self._trace.new_var("numpy exponential")
            return SymScalar(self._trace, var, lambda u: -math.log1p(-u) * scale, "numpy exponential")

        return _sized(make, size)

    def standard_exponential(self, size: Any = None) -> Any:
        return self.exponential(1.0, size)

    def choice(self, a: Any, size: Any = None, replace: bool = True, p: Any = None, **kw: Any) -> Any:
        pop = np.arange(a) if isinstance(a, (int, np.integer)) else np.asarray(a)
        if p is not None:
            note_weights(self._trace, p)
        weights = np.ones(len(pop)) if p is None else np.asarray(p, dtype=np.float64)
        if size is None:
            return pop[_categorical(self._trace, weights, "numpy choice")]
        if not replace:
            raise unsupported("numpy choice without replacement")
        return _sized(lambda: pop[_categorical(self._trace, weights, "numpy choice")], size)

    def seed(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        raise unsupported(f"numpy random {name}")


class SymRandom:
    """Stands in for Python's ``random`` functions and ``random.Random`` instances."""

    def __init__(self, trace: Trace, *args: Any, **kwargs: Any) -> None:
        self._trace = trace

    def random(self) -> SymScalar:
        return _sym_uniform(self._trace, "random.random")

    def uniform(self, a: float, b: float) -> SymScalar:
        return _sym_uniform(self._trace, "random.uniform", a, b)

    def choices(self, population: Any, weights: Any = None, *, cum_weights: Any = None, k: int = 1) -> list:
        pop = list(population)
        if cum_weights is not None:
            cw = [float(x) for x in cum_weights]
            weights = [cw[0]] + [cw[i] - cw[i - 1] for i in range(1, len(cw))]
        w = [1.0] * len(pop) if weights is None else weights
        return [pop[_categorical(self._trace, w, "random.choices")] for _ in range(k)]

    def choice(self, seq: Any) -> Any:
        return seq[_categorical(self._trace, [1.0] * len(seq), "random.choice")]

    def seed(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        raise unsupported(f"random.{name}")


_PY_NAMES = ("random", "uniform", "choices", "choice")
_PY_REFUSED = ("randint", "randrange", "gauss", "normalvariate", "shuffle", "sample", "getrandbits", "expovariate")
_NP_NAMES = ("random", "random_sample", "rand", "uniform", "choice", "exponential", "standard_exponential")
_NP_REFUSED = (
    "randn",
    "randint",
    "normal",
    "standard_normal",
    "permutation",
    "shuffle",
    "integers",
    "gumbel",
    "binomial",
)
_NP_FACTORIES = ("default_rng", "Generator", "RandomState")


def _originals() -> dict[tuple[str, str], Any]:
    out: dict[tuple[str, str], Any] = {}
    for name in _PY_NAMES + _PY_REFUSED + ("Random",):
        if hasattr(_random, name):
            out[("random", name)] = getattr(_random, name)
    for name in _NP_NAMES + _NP_REFUSED + _NP_FACTORIES:
        if hasattr(np.random, name):
            out[("numpy.random", name)] = getattr(np.random, name)
    return out


_ORIGINALS = _originals()


def _refuser(what: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise unsupported(what)

    return refuse


def _replacements(trace: Trace) -> dict[tuple[str, str], Any]:
    py, gen = SymRandom(trace), SymGenerator(trace)
    out: dict[tuple[str, str], Any] = {}
    for mod, name in _ORIGINALS:
        if mod == "random":
            if name == "Random":
                out[(mod, name)] = lambda *a, **k: SymRandom(trace)
            elif name in _PY_NAMES:
                out[(mod, name)] = getattr(py, name)
            else:
                out[(mod, name)] = _refuser(f"random.{name}")
        elif name in _NP_FACTORIES:
            out[(mod, name)] = lambda *a, **k: SymGenerator(trace)
        elif name in _NP_NAMES:
            out[(mod, name)] = getattr(gen, name)
        else:
            out[(mod, name)] = _refuser(f"numpy.random.{name}")
    return out
