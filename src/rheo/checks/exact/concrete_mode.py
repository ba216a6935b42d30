"""The concrete draws themselves (``rheo.checks.exact.concrete`` for the method): a
``TorchFunctionMode`` that answers torch's random calls with the values of the points the
enumerator chose, one per row of a batched call, and registers each draw's blocks (a
uniform, an exponential race's row, a categorical pick) in a ``Layout`` on first sight.

Specification: docs/spec.md §7.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from rheo.checks.exact.random_values import MANTISSA_BITS, SCHEDULE_NEEDED, ScheduleChanged, Unsupported, call_site

MAX_OPTIONS = 64  # a randint over more values is not enumerated
DELTA = 1e-30  # the exponential that makes a race's token win (score w / DELTA)
_REFUSED = {
    "randn", "randn_like", "randperm", "normal", "normal_", "poisson", "random_", "cauchy_", "geometric_",
    "log_normal_", "binomial",
}  # fmt: skip
_DRAWS = {"rand", "rand_like", "uniform_", "exponential_", "randint", "randint_like", "multinomial"}
_DRAWS |= {"bernoulli", "bernoulli_"} | _REFUSED


class NotRowwise(Exception):
    """A batched call's draws are not ``rows`` equal slices of the single call's."""


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
            return (1.0,) * self.size
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
            n_blocks = int(np.prod(shape[:-1])) if kind == "race" and shape else int(np.prod(shape))
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
        bits = MANTISSA_BITS.get(str(out.dtype).replace("torch.", ""), 53)

        def make(i: int, site: str) -> Block:
            return Block(i, kind, 1 if kind == "u" else shape[-1], site, what, grid=bits)

        d = self._draw(kind, shape, what, make)
        vals: list[float] = []
        for point in self.points:
            for bid in d.blocks:
                b = self.layout.blocks[bid]
                v = point.get(bid, b.default())
                if kind == "race":
                    vals.extend(x * scale for x in v)
                else:
                    vals.append(value(b, v))
        with torch._C.DisableTorchFunctionSubclass():
            out.copy_(torch.tensor(vals, dtype=torch.float64).reshape(out.shape).to(out.dtype))

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
        probs = args[0]
        n = int(args[1] if len(args) > 1 else kwargs.get("num_samples", 1))
        replacement = bool(args[2] if len(args) > 2 else kwargs.get("replacement", False))
        if n > 1 and not replacement:
            raise Unsupported(f"torch.multinomial without replacement of {n} samples at {call_site()}")
        with torch._C.DisableTorchFunctionSubclass():
            rows = probs.detach().double().cpu().reshape(-1, probs.shape[-1])
        if bool((rows < 0).any()) or not bool(torch.isfinite(rows).all()) or bool((rows.sum(-1) <= 0).any()):
            raise RuntimeError("multinomial: invalid probability distribution (the gate's stand-in refuses it too)")
        V = probs.shape[-1]
        shape = (*probs.shape[:-1], n)

        def make(i: int, site: str) -> Block:
            return Block(i, "cat", V, site, "torch.multinomial")

        d = self._draw("cat", shape, "torch.multinomial", make)
        ws = [row for row in rows.tolist() for _ in range(n)]
        picks = self._cat_values(d, ws)
        return torch.tensor(picks, dtype=torch.long, device=probs.device).reshape(shape)

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

    def add(self, make: Callable[[int, str], Block], site: str) -> int:
        b = make(len(self.blocks), site)
        self.blocks.append(b)
        return b.id
