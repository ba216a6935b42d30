"""torch's random calls followed exactly (``rheo.checks.exact.tracer`` for the idea; the Python
and NumPy side is ``rheo.checks.exact.random_values``).

``RandomMode`` (a ``TorchFunctionMode``) answers ``torch.rand``, ``rand_like``,
``Tensor.uniform_`` and ``Tensor.exponential_`` with a ``SymTensor`` (one variable per
element), ``torch.multinomial`` and ``torch.bernoulli`` with categorical choices, and
refuses the random calls it cannot follow (``randn``, ``randint``, ``normal_``, ...), with
or without a ``Generator``. A ``SymTensor`` records the chain of operations applied to its
draw: monotone elementwise maps (``1 - u``, ``u * c``, ``log``, casts) and reshaping or
indexing. A comparison with a concrete tensor replays that chain on a candidate value of
the draw, with the implementation's own operations, to find where the answer changes.

Specification: docs/spec.md §7.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from rheo.checks.exact.precision import dtype_bits, precision_name
from rheo.checks.exact.precision_torch import carried
from rheo.checks.exact.random_values import SymScalar, Trace, call_site, unsupported

_SENTINEL = object()
_COMPARE = {
    "lt": "lt",
    "le": "le",
    "gt": "gt",
    "ge": "ge",
    "less": "lt",
    "less_equal": "le",
    "greater": "gt",
    "greater_equal": "ge",
}
_MONOTONE = {
    "add", "radd", "sub", "rsub", "mul", "rmul", "div", "true_divide", "truediv", "rtruediv", "neg", "negative",
    "log", "log2", "log10", "log1p", "exp", "expm1", "sqrt", "rsqrt", "reciprocal", "pow", "clamp", "clip",
    "clamp_min", "clamp_max", "abs", "sigmoid", "tanh",
}  # fmt: skip
_SAME_VARS = {
    "float",
    "double",
    "half",
    "bfloat16",
    "to",
    "type",
    "type_as",
    "contiguous",
    "clone",
    "detach",
    "cpu",
    "cuda",
}
_STRUCTURAL = {
    "getitem", "view", "reshape", "squeeze", "unsqueeze", "flatten", "expand", "expand_as", "t", "transpose",
    "permute", "select", "narrow", "index_select", "gather", "view_as", "reshape_as", "broadcast_to", "repeat",
}  # fmt: skip
_META = {
    "get", "size", "dim", "numel", "len", "ndimension", "is_floating_point", "element_size", "stride",
    "is_contiguous", "repr", "format", "str", "data_ptr", "nelement", "storage_offset", "requires_grad_",
}  # fmt: skip
_IN_PLACE_OPERATORS = {f"__i{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or")}
_REFUSED = {
    "randn", "randn_like", "randint", "randint_like", "randperm", "normal", "normal_", "poisson", "random_",
    "cauchy_", "geometric_", "log_normal_", "binomial",
}  # fmt: skip


_RANDOM = {"rand", "rand_like", "uniform_", "exponential_", "multinomial", "bernoulli", "bernoulli_"} | _REFUSED
_PLAIN: set = set()  # torch functions met whose name is none of _RANDOM's


def _name(func: Any) -> str:
    return getattr(func, "__name__", str(func)).strip("_")


def _syms(obj: Any, out: list) -> list:
    if isinstance(obj, SymTensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _syms(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _syms(x, out)
    return out


def _swap(obj: Any, sym: Any, value: Any) -> Any:
    if obj is sym:
        return value
    if isinstance(obj, (list, tuple)):
        return type(obj)(_swap(x, sym, value) for x in obj)
    return obj


class SymTensor(torch.Tensor):
    """A tensor whose elements are random: element k is ``chain(base(u))[k]`` for the
    draw's variable ``_rheo_vars[k]``."""

    _rheo_trace: Trace
    _rheo_base: Callable[[torch.Tensor], torch.Tensor]
    _rheo_shape: torch.Size
    _rheo_steps: list
    _rheo_vars: torch.Tensor
    _rheo_origin: str
    _rheo_plain: bool  # the draw itself (no map applied): its comparisons' cuts lie beside the thresholds
    _rheo_first: int  # the variable of the draw's first element

    def _rheo_at(self, u: float) -> torch.Tensor:
        """The chain replayed with every element of the draw at value ``u``."""
        with torch._C.DisableTorchFunctionSubclass():
            x = self._rheo_base(torch.full(self._rheo_shape, u, dtype=torch.float64, device=self._rheo_vars.device))
            for func, args, kwargs in self._rheo_steps:
                x = func(*_swap(args, _SENTINEL, x), **kwargs)
        return x

    def _rheo_at_values(self, values: dict[int, float]) -> torch.Tensor:
        """The chain replayed with the draw's variables at ``values`` (var -> u; 0.5 elsewhere)."""
        with torch._C.DisableTorchFunctionSubclass():
            u = torch.full(self._rheo_shape, 0.5, dtype=torch.float64)
            flat = u.view(-1)
            for var, value in values.items():
                flat[var - self._rheo_first] = value
            x = self._rheo_base(u.to(self._rheo_vars.device))
            for func, args, kwargs in self._rheo_steps:
                x = func(*_swap(args, _SENTINEL, x), **kwargs)
        return x

    def _derive(self, out: torch.Tensor, step: tuple, new_vars: torch.Tensor) -> SymTensor:
        res = out.as_subclass(SymTensor)
        res._rheo_trace, res._rheo_base, res._rheo_shape = self._rheo_trace, self._rheo_base, self._rheo_shape
        res._rheo_steps, res._rheo_vars, res._rheo_origin = self._rheo_steps + [step], new_vars, self._rheo_origin
        res._rheo_plain, res._rheo_first = False, self._rheo_first
        return res

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _name(func)
        syms = list({id(s): s for s in _syms((args, kwargs), [])}.values())
        if name in _META:
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **kwargs)
        sym = syms[0]
        if len(syms) > 1:
            raise unsupported(f"torch {name} on two random tensors ({sym._rheo_origin})")
        plain = "r" + name if name in ("add", "sub", "mul", "truediv") and args and args[0] is not sym else name
        raw = getattr(func, "__name__", "")  # ``name`` has its underscores stripped: mul_ reads as mul
        in_place = raw.endswith("_") and not raw.startswith("__") or raw in _IN_PLACE_OPERATORS
        if in_place and raw.strip("_") not in ("squeeze", "unsqueeze"):
            raise unsupported(f"in-place torch {raw} with a random tensor ({sym._rheo_origin})")
        if name in _COMPARE:
            return sym._compare(func, _COMPARE[name], args, kwargs)
        if name in ("argmax", "argmin"):
            return sym._race(name, args, kwargs)
        if name in ("topk", "sort", "argsort"):
            return sym._order(name, args, kwargs)
        if name == "searchsorted" and args and args[0] is not sym:
            return sym._searchsorted(func, args, kwargs)
        if name == "item":
            return SymScalar(
                sym._rheo_trace,
                int(sym._rheo_vars.reshape(-1)[0]),
                lambda u: sym._rheo_at(u).item(),
                sym._rheo_origin,
                sym._rheo_plain,
            )
        if name == "tolist":
            return sym._tolist()
        if plain in _MONOTONE or name in _SAME_VARS or name in _STRUCTURAL:
            with torch._C.DisableTorchFunctionSubclass():
                out = func(*args, **kwargs)
                if not isinstance(out, torch.Tensor):
                    raise unsupported(f"torch {name} on a random tensor ({sym._rheo_origin})")
                if name in _SAME_VARS:
                    new_vars = sym._rheo_vars
                elif name in _STRUCTURAL:
                    new_vars = func(*_swap(args, sym, sym._rheo_vars), **kwargs)
                else:
                    try:
                        new_vars = torch.broadcast_to(sym._rheo_vars, out.shape)
                    except RuntimeError:
                        raise unsupported(
                            f"torch {name} mixes the elements of a random tensor ({sym._rheo_origin})"
                        ) from None
            step = (func, _swap(args, sym, _SENTINEL), kwargs)
            return sym._derive(out, step, new_vars)
        raise unsupported(f"torch {name} on a random tensor ({sym._rheo_origin}): the check cannot follow it")

    def _compare(self, func: Any, op: str, args: tuple, kwargs: dict) -> torch.Tensor:
        for a in args:
            if a is not self:
                self._rheo_trace.note_operand(a, "a threshold")
        with torch._C.DisableTorchFunctionSubclass():
            shape = func(*args, **kwargs).shape
            vars_b = torch.broadcast_to(self._rheo_vars, shape).reshape(-1).tolist()
        template = _swap(args, self, _SENTINEL)

        def at(u: float) -> torch.Tensor:
            with torch._C.DisableTorchFunctionSubclass():
                return func(*_swap(template, _SENTINEL, self._rheo_at(u)), **kwargs).reshape(-1)

        def element(k: int) -> Callable[[float], bool]:
            return lambda u: bool(at(u)[k])

        near = self._near(args, kwargs, shape)

        def threshold(k: int) -> Callable[[], float | None] | None:
            return None if near is None else lambda: near()[k]

        out = [
            self._rheo_trace.split(var, element(k), f"{op} {self._rheo_origin}[{var}]", threshold(k))
            for k, var in enumerate(vars_b)
        ]
        return torch.tensor(out, dtype=torch.bool, device=self._rheo_vars.device).reshape(shape)

    def _near(self, args: tuple, kwargs: dict, shape: torch.Size) -> Callable[[], list[float | None]] | None:
        """Each element's threshold, when asked, where the draw itself is compared with a
        plain tensor or number (``Trace.split`` looks for the cut beside it first)."""
        other = [a for a in args if a is not self]
        if not self._rheo_plain or not self._rheo_trace.near_cuts or kwargs or len(args) != 2 or len(other) != 1:
            return None
        x, n = other[0], shape.numel()
        values: list[float | None] = []

        def near() -> list[float | None]:
            if not values:
                if isinstance(x, (int, float)):
                    values.extend([float(x)] * n)
                elif isinstance(x, torch.Tensor) and not isinstance(x, SymTensor) and x.is_floating_point():
                    with torch._C.DisableTorchFunctionSubclass():
                        values.extend(torch.broadcast_to(x.detach(), shape).reshape(-1).double().tolist())
                else:
                    values.extend([None] * n)
            return values

        return near

    def _searchsorted(self, func: Any, args: tuple, kwargs: dict) -> torch.Tensor:
        """Inverse CDF: each index is a nondecreasing step function of its variable,
        resolved one step at a time."""
        self._rheo_trace.note_operand(args[0], "an inverse CDF")
        with torch._C.DisableTorchFunctionSubclass():
            shape = func(*args, **kwargs).shape
            vars_b = self._rheo_vars.reshape(-1).tolist()
        template = _swap(args, self, _SENTINEL)
        n = args[0].shape[-1]

        def at(u: float) -> torch.Tensor:
            with torch._C.DisableTorchFunctionSubclass():
                return func(*_swap(template, _SENTINEL, self._rheo_at(u)), **kwargs).reshape(-1)

        def above(k: int, j: int) -> Callable[[float], bool]:
            return lambda u: int(at(u)[k]) > j

        out = []
        for k, var in enumerate(vars_b):
            j = 0
            while j < n and self._rheo_trace.split(var, above(k, j), f"searchsorted {self._rheo_origin}[{var}] > {j}"):
                j += 1
            out.append(j)
        return torch.tensor(out, dtype=torch.long, device=self._rheo_vars.device).reshape(shape)

    def _tolist(self) -> Any:
        def element(k: int) -> Callable[[float], Any]:
            return lambda u: self._rheo_at(u).reshape(-1)[k].item()

        flat = [
            SymScalar(self._rheo_trace, int(v), element(k), self._rheo_origin)
            for k, v in enumerate(self._rheo_vars.reshape(-1).tolist())
        ]
        if self._rheo_vars.dim() == 0:
            return flat[0]
        arr: Any = flat
        for n in reversed(list(self._rheo_vars.shape)[1:]):
            arr = [arr[i : i + n] for i in range(0, len(arr), n)]
        return arr

    def _race_rows(self, kind: str, name: str, dim: Any) -> list[_RaceRow]:
        """The races over this tensor's elements (largest score first for "argmax", smallest
        for "argmin"): the whole tensor for ``dim`` None, else one per row along ``dim`` (a
        batch of rows drawn by one call, each row a race of its own: the rows are separated
        before any weight counts). Each row's weights, the E each element's uniform is mapped
        to, and its variables; refused where a row is no race, or where its values were
        compared before (a race needs untouched uniforms), raced already, or shared with
        another element of the race."""
        vars_ = self._rheo_vars
        if dim is None or vars_.dim() == 0:
            rows = vars_.reshape(1, -1)
        else:
            rows = vars_.movedim(dim % vars_.dim(), -1).reshape(-1, vars_.shape[dim % vars_.dim()])
        flat_vars = rows.reshape(-1).tolist()
        if len(set(flat_vars)) != len(flat_vars):
            raise unsupported(f"torch {name} over elements that share a random value ({self._rheo_origin})")
        trace = self._rheo_trace
        if any(v in trace.raced or trace.intervals[v] != [0.0, 1.0] for v in flat_vars):
            raise unsupported(f"torch {name} over random values already compared or raced ({self._rheo_origin})")
        trace.note_operand(self, "a race")  # its keys' constants (log q), the precision of the keys
        trace.note_dtype(self.dtype, "a race")
        grid = trace.grids[flat_vars[0]]  # and its uniforms carry their generator's grid
        trace.note_bits(grid, f"{self._rheo_origin} drawn in {precision_name(grid)}", "a race")
        us = [0.05, 0.2, 0.4, 0.6, 0.8, 0.95]
        with torch._C.DisableTorchFunctionSubclass():
            at = [self._rheo_at(u) for u in us]  # the keys with every uniform at u: 6 x self.shape
            bits = dtype_bits(at[0].dtype)
            F = torch.stack([x.double() for x in at]).cpu()
            if dim is not None and vars_.dim() > 0:
                F = F.movedim(dim % vars_.dim() + 1, -1)
            F = F.reshape(len(us), rows.shape[0], rows.shape[1])  # [6, R, n]: each row's keys at each u
            base = torch.tensor(
                [float(self._rheo_base(torch.full((1,), u, dtype=torch.float64)).item()) for u in us],
                dtype=torch.float64,
            )
        out = []
        for r in range(rows.shape[0]):
            fit = _race_fit(F[:, r], base, kind, rows.shape[0] > 1, bits)
            if fit is None:
                where = f" (row {r} of {rows.shape[0]})" if rows.shape[0] > 1 else ""
                raise unsupported(
                    f"torch {name} over random values that are neither an exponential race (p / E) nor a Gumbel-max "
                    f"(log p + G){where} ({self._rheo_origin})"
                )
            weights, which = fit
            out.append(_RaceRow(weights, self._exp_of(which), rows[r].tolist()))
        trace.raced.update(flat_vars)
        return out

    def _exp_of(self, which: int) -> Callable[[float], float]:
        """The E a uniform u is mapped to by the race's form (``_race_fit``'s ``which``)."""

        def exp_of(u: float) -> float:
            if which == 0:
                with torch._C.DisableTorchFunctionSubclass():
                    return float(self._rheo_base(torch.full((1,), u, dtype=torch.float64)).item())
            return -math.log(u) if which == 1 else -math.log1p(-u)

        return exp_of

    def _order(self, name: str, args: tuple, kwargs: dict) -> Any:
        """``topk``, ``sort``, ``argsort`` over a race (or a batch of rows, each its own race):
        its places drawn one after another without replacement (Plackett-Luce), each a
        categorical choice over the weights not drawn yet; the result is the real operation's
        on values that finish in that order (the ``values`` refuse any use: their size is not
        part of the law)."""
        if name == "topk":
            k = int(_arg(args, kwargs, 1, "k", 1))
            dim = _arg(args, kwargs, 2, "dim", -1)
            largest = bool(_arg(args, kwargs, 3, "largest", True))
        else:
            k = None
            dim = _arg(args, kwargs, 1, "dim", -1)
            largest = bool(_arg(args, kwargs, 2, "descending", False))
        races = self._race_rows("argmax" if largest else "argmin", name, dim)
        trace = self._rheo_trace
        real: torch.Tensor | None = None
        if trace.rng is not None:  # probe mode: the data are the values; their own order is forced
            with torch._C.DisableTorchFunctionSubclass():
                data = self.double() if self.dim() == 0 else self.movedim(dim % self.dim(), -1).double()
                real = torch.argsort(data.reshape(len(races), -1), descending=largest, stable=True)
        values: dict[int, float] = {}
        wanted: list[tuple[list[int], list[int], int]] = []
        for r, race in enumerate(races):
            weights, n = race.weights, len(race.weights)
            live = [j for j in range(n) if weights[j] > 0]
            places = len(live) if k is None else min(k, len(live))
            row = f" row {r}" if len(races) > 1 else ""
            left, order = list(weights), []
            for i in range(places):
                forced = None
                if real is not None:
                    j_real = int(real[r, i])
                    forced = j_real if left[j_real] > 0 else None
                trace.draws += 1
                j = trace.choose(f"{name}{row} place {i} {self._rheo_origin}", left, forced)
                order.append(j)
                left[j] = 0.0
            full = order + [j for j in live if j not in order]
            scores = {j: weights[j] * 2.0**i for i, j in enumerate(full)}
            top = max(scores.values(), default=1.0)
            values.update({race.vars[j]: _inverse(race.exp_of, 4 * scores[j] / top) for j in full})
            wanted.append((order, full, places))
        with torch._C.DisableTorchFunctionSubclass():
            rep = self._rheo_at_values(values).reshape(self.shape)
            out = getattr(torch, name)(rep, *args[1:], **kwargs)
            idx = out if name == "argsort" else out[1]
            got_rows = (idx if idx.dim() == 0 else idx.movedim(dim % idx.dim(), -1)).reshape(len(races), -1).tolist()
        for (order, full, places), got in zip(wanted, got_rows):
            if got[:places] != order or (k is None and got[: len(full)] != full):
                raise unsupported(
                    f"torch {name} over a race did not keep the order its values were chosen in ({self._rheo_origin})"
                )
        if name == "argsort":
            return idx
        poisoned = _RaceValues.of(out[0], self._rheo_origin)
        return type(out)((poisoned, idx))

    def _race(self, name: str, args: tuple, kwargs: dict) -> torch.Tensor:
        """argmax / argmin over independent random elements (along ``dim``, each row its own
        race): categorical when each element is the exponential race p_k / E_k (or E_k / p_k
        for argmin), the Gumbel-max c_k + G_k, or u_k^(1/p_k) (an element of weight 0, -inf
        for argmax, never wins)."""
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        keepdim = kwargs.get("keepdim", args[2] if len(args) > 2 else False)
        shape = self._rheo_vars.shape
        races = self._race_rows(name, name, dim)
        picks = []
        fixed: list[int] | None = None  # a row of a batch whose tokens all weigh 0: what the op gives there
        for r, race in enumerate(races):
            if not any(w > 0 for w in race.weights):
                if fixed is None:
                    with torch._C.DisableTorchFunctionSubclass():
                        rep = self._rheo_at(0.5).reshape(shape)
                        real = getattr(torch, name)(rep) if dim is None else getattr(torch, name)(rep, dim)
                        fixed = real.reshape(-1).tolist()
                picks.append(int(fixed[r]))
                continue
            row = f" row {r}" if len(races) > 1 else ""
            picks.append(self._rheo_trace.categorical(race.weights, f"{name}{row} race {self._rheo_origin}"))
        if dim is None or len(shape) == 0:
            out = torch.tensor(picks[0], device=self._rheo_vars.device)
            return out.reshape([1] * len(shape)) if keepdim else out
        d = dim % len(shape)
        rest = [s for i, s in enumerate(shape) if i != d]
        out = torch.tensor(picks, device=self._rheo_vars.device).reshape(rest)
        return out.unsqueeze(d) if keepdim else out


@dataclass
class _RaceRow:
    """One race of a ``SymTensor``: its weights, the E of a uniform, its elements' variables."""

    weights: list[float]
    exp_of: Callable[[float], float]
    vars: list[int]


class _RaceValues(torch.Tensor):
    """The values of a ``topk`` or ``sort`` over a race: refused wherever used (the law of
    their sizes is not the order's)."""

    _rheo_origin: str

    @staticmethod
    def of(t: torch.Tensor, origin: str) -> _RaceValues:
        out = t.as_subclass(_RaceValues)
        out._rheo_origin = origin
        return out

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = _name(func)
        if name in _META:
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))
        origin = next((a._rheo_origin for a in args if isinstance(a, _RaceValues)), "?")
        raise unsupported(
            f"torch {name} on the values of a random top-k or sort ({origin}): only its indices can be followed"
        )


def _inverse(exp_of: Callable[[float], float], E: float) -> float:
    """The uniform u with exp_of(u) = E (exp_of monotone on (0, 1)), by bisection."""
    lo, hi = 0.0, 1.0
    rising = exp_of(0.75) > exp_of(0.25)
    for _ in range(80):
        mid = (lo + hi) / 2
        if (exp_of(mid) < E) == rising:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _constant(cols: torch.Tensor, rtol: float = 1e-9) -> torch.Tensor | None:
    """The per-column value when each column of ``cols`` is constant (relative ``rtol``)."""
    first = cols[0]
    ok = torch.isfinite(cols).all() and torch.allclose(cols, first.expand_as(cols), rtol=rtol, atol=rtol * 1e-3)
    return first if ok else None


RACE_RTOL = {53: 1e-9, 24: 1e-5}  # a race form's fit, by the float bits its keys were computed in (16-bit: 1e-2)


def _race_fit(
    F: torch.Tensor, base: torch.Tensor, name: str, batch: bool = False, bits: int = 53
) -> tuple[list[float], int] | None:  # F: [6, n] one row's keys at 6 values of u; base: [6] the draw's map there
    """Categorical weights of argmax/argmin(F) when F[:, k] = W_k / E, c_k + Gumbel or
    u^(1/W_k) (argmax), E / W_k (argmin), with E an exponential variable that is ``base``
    (0), -log u (1) or -log(1 - u) (2) of the uniform; and which E it is. An element that is
    -inf throughout (argmax; +inf for argmin), or 0 throughout in the form u^(1/W), has
    weight 0. A row of a ``batch`` whose every element has weight 0 is no race (weights all
    0: it draws nothing); alone, it is refused. ``bits``: the precision F was computed in
    (the fit's tolerance, ``RACE_RTOL``)."""
    rtol = RACE_RTOL.get(bits, 1e-2 if bits < 24 else 1e-5)
    u = torch.tensor([0.05, 0.2, 0.4, 0.6, 0.8, 0.95], dtype=torch.float64)
    dead = (torch.isneginf(F) if name == "argmax" else torch.isposinf(F)).all(0)
    if bool(dead.all()):
        return ([0.0] * F.shape[1], 1) if batch else None
    G = F[:, ~dead]
    forms = [G]
    if name == "argmax" and bool(((G >= 0) & (G < 1)).all()):
        with torch.no_grad():
            forms.append(-1 / torch.log(G))  # u^(1/W) = exp(-E / W): -1 / log of it is W / E (0 where W = 0)
    exps = [base, -torch.log(u), -torch.log1p(-u)]
    for H in forms:
        for which, E in enumerate(exps):
            if not bool((E > 0).all()):
                continue
            E = E[:, None]
            w: torch.Tensor | None = None
            if name == "argmax":
                w = _constant(H * E, rtol)  # F = W / E
                if w is None or not bool((w >= 0).all()):
                    c = _constant(H + torch.log(E), rtol)  # F = c + G, G = -log E
                    w = None if c is None else torch.exp(c - c.max())
            else:
                inv = _constant(H / E, rtol)  # F = E / W
                w = None if inv is None or not bool((inv > 0).all()) else 1 / inv
            if w is not None and bool((w > 0).any()):
                out = torch.zeros(F.shape[1], dtype=torch.float64)
                out[~dead] = w
                return out.tolist(), which
    return None


def _make_sym(
    trace: Trace, t: torch.Tensor, origin: str, base: Callable[[torch.Tensor], torch.Tensor], plain: bool = False
) -> SymTensor:
    n = t.numel()
    first = len(trace.intervals)
    grid = dtype_bits(t.dtype)  # torch.rand: k / 2^24 in float32
    for _ in range(n):
        trace.new_var(origin, grid)
    if trace.rng is not None:  # probe mode: the concrete data are the variables' values
        with torch._C.DisableTorchFunctionSubclass():
            vals = torch.tensor(trace.values[first : first + n], dtype=torch.float64).reshape(t.shape)
            t.copy_(base(vals.to(t.device)).to(t.dtype))
    t.__class__ = SymTensor
    sym: SymTensor = t  # type: ignore[assignment]  # the class was just set
    sym._rheo_trace, sym._rheo_base, sym._rheo_shape = trace, base, t.shape
    sym._rheo_steps, sym._rheo_origin, sym._rheo_plain = [], f"{origin} at {_site()}", plain
    sym._rheo_first = first
    with torch._C.DisableTorchFunctionSubclass():
        sym._rheo_vars = torch.arange(first, first + n, device=t.device).reshape(t.shape)
    return sym


def _site() -> str:
    return call_site()


def _arg(args: tuple, kwargs: dict, i: int, key: str, default: Any) -> Any:
    return args[i] if len(args) > i else kwargs.get(key, default)


class RandomMode(TorchFunctionMode):
    """Answers torch's random calls from a ``Trace`` while active."""

    def __init__(self, trace: Trace) -> None:
        super().__init__()
        self.trace = trace

    def __torch_function__(self, func, types, args=(), kwargs=None):
        try:
            plain = func in _PLAIN  # most calls: not random, answered at once
        except TypeError:  # not hashable
            plain = False
        if plain:
            return carried(func, args, kwargs, func(*args, **(kwargs or {})), self.trace)
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name not in _RANDOM:
            try:
                _PLAIN.add(func)
            except TypeError:  # looked up by name each time
                pass
            return carried(func, args, kwargs, func(*args, **kwargs), self.trace)
        if name in ("rand", "rand_like"):
            return _make_sym(self.trace, func(*args, **kwargs), f"torch.{name}", lambda u: u, plain=True)
        if name == "uniform_":
            a, b = float(_arg(args, kwargs, 1, "from", 0.0)), float(_arg(args, kwargs, 2, "to", 1.0))
            return _make_sym(self.trace, func(*args, **kwargs), "Tensor.uniform_", lambda u: a + (b - a) * u)
        if name == "exponential_":
            lambd = float(_arg(args, kwargs, 1, "lambd", 1.0))
            return _make_sym(
                self.trace, func(*args, **kwargs), "Tensor.exponential_", lambda u: -torch.log1p(-u) / lambd
            )
        if name == "multinomial":
            return self._multinomial(args, kwargs)
        if name in ("bernoulli", "bernoulli_"):
            return self._bernoulli(name, args, kwargs)
        if name in _REFUSED:
            raise unsupported(f"torch.{name}")
        return func(*args, **kwargs)

    def _multinomial(self, args: tuple, kwargs: dict) -> torch.Tensor:
        probs = args[0]
        n = int(_arg(args, kwargs, 1, "num_samples", 1))
        replacement = bool(_arg(args, kwargs, 2, "replacement", False))
        if isinstance(probs, SymTensor):
            raise unsupported("torch.multinomial with random weights")
        self.trace.note_operand(probs, "the weights of a categorical draw")
        rows = probs.detach().double().cpu().reshape(-1, probs.shape[-1]).tolist()
        picks = []
        for row in rows:
            w, got = list(row), []
            if any(x < 0 or x != x for x in w) or sum(w) <= 0:
                raise RuntimeError("multinomial: invalid probability distribution (the gate's stand-in refuses it too)")
            for _ in range(n):
                i = self.trace.categorical(w, f"torch.multinomial over {len(w)} at {_site()}")
                got.append(i)
                if not replacement:
                    w[i] = 0.0
            picks.append(got)
        return torch.tensor(picks, dtype=torch.long, device=probs.device).reshape(*probs.shape[:-1], n)

    def _bernoulli(self, name: str, args: tuple, kwargs: dict) -> torch.Tensor:
        target = args[0]
        p = _arg(args, kwargs, 1, "p", None) if name == "bernoulli_" else _arg(args, kwargs, 1, "p", target)
        if isinstance(p, SymTensor) or isinstance(target, SymTensor):
            raise unsupported(f"torch.{name} with random probabilities")
        self.trace.note_operand(p, "the weights of a categorical draw")
        probs = torch.broadcast_to(torch.as_tensor(p, dtype=torch.float64), target.shape).reshape(-1).tolist()
        bits = [float(self.trace.categorical([1 - x, x], f"torch.{name} at {_site()}")) for x in probs]
        out = torch.tensor(bits, dtype=target.dtype, device=target.device).reshape(target.shape)
        if name == "bernoulli_":
            with torch._C.DisableTorchFunctionSubclass():
                target.copy_(out)
            return target
        return out
