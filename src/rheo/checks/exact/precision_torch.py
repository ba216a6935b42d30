"""The torch side of ``rheo.checks.exact.precision``: ``carried``, called by the symbolic
tracer's torch mode (``random_values_torch.RandomMode``) after every torch call of a run,
carries each floating tensor's precision on to what is computed from it and notes on the
run's trace the lowest precision that met a random tensor.

Specification: docs/spec.md §7.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rheo.checks.exact.precision import Tainted, dtype_bits, operand_bits, precision_name
from rheo.checks.exact.random_values import Trace, call_site


def _random(x: Any) -> bool:
    """A random tensor of the symbolic tracer (``random_values_torch.SymTensor``)."""
    return isinstance(x, torch.Tensor) and "_rheo_trace" in x.__dict__


_FLOAT_BITS = {torch.float64: 53, torch.float32: 24, torch.float16: 11, torch.bfloat16: 8}
_REACHED = {"lt": "a threshold", "le": "a threshold", "gt": "a threshold", "ge": "a threshold", "eq": "a threshold"}
_REACHED |= {"argmax": "a race", "argmin": "a race", "topk": "a race", "sort": "a race", "argsort": "a race"}


def _operands(args: tuple, kwargs: dict) -> tuple[int, str, bool]:
    """(lowest bits, where they came from, whether a random tensor is among them) of a torch
    call's floating operands (tensors, ``Tainted`` floats; lists of them one level down). A
    random tensor's own dtype is not counted (its uniforms' precision is the race's or the
    backend law's), only the constants already in its map (``_rheo_bits``)."""
    bits, origin, random = 53, "", False
    for group in (args, tuple(kwargs.values()) if kwargs else ()):
        for x in group:
            for y in _flat(x):
                if _random(y):
                    random = True
                    b = y.__dict__.get("_rheo_bits", 53)
                    if b < bits:
                        bits, origin = b, y.__dict__.get("_rheo_from", "")
                elif isinstance(y, (torch.Tensor, Tainted)):
                    b = y.__dict__.get("_rheo_bits", 53) if isinstance(y, Tainted) else _tensor_bits(y)
                    if b < bits:
                        bits, origin = operand_bits(y)
                elif isinstance(y, (np.ndarray, np.floating)) and y.dtype.kind == "f" and dtype_bits(y.dtype) < bits:
                    bits, origin = operand_bits(y)
    return bits, origin, random


def _flat(x: Any) -> Any:
    """The operands in ``x``: itself, or the items of nested lists and tuples (a Python
    number of a list made from ``q32.tolist()`` keeps its precision)."""
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flat(y)
    else:
        yield x


def _tensor_bits(t: torch.Tensor) -> int:
    b = _FLOAT_BITS.get(t.dtype, 53)
    return min(b, t.__dict__.get("_rheo_bits", 53)) if b < 53 or "_rheo_bits" in t.__dict__ else b


def carried(func: Any, args: tuple, kwargs: dict | None, out: Any, trace: Trace) -> Any:
    """``out``, after a torch call of a run, with the precision of its operands carried on
    (``rheo.checks.exact.precision``): a floating tensor computed from lower-precision values
    (or made lower than them: the call is where that precision comes from) keeps their bits;
    a Python float read from one is ``Tainted``; where a random tensor is among the
    operands, the lowest precision that met it is noted on ``trace``."""
    bits, origin, random = _operands(args, kwargs or {})
    out_bits = _FLOAT_BITS.get(out.dtype) if isinstance(out, torch.Tensor) else None
    if bits == 53 and (out_bits is None or out_bits == 53):
        return out
    name = getattr(func, "__name__", str(func)).strip("_")
    if random and bits < 53:
        trace.note_bits(bits, origin, _REACHED.get(name, "the map of a random value"))
    if isinstance(out, torch.Tensor):
        if out_bits is None:
            return out
        if _random(out):
            if bits < 53:
                out.__dict__["_rheo_bits"], out.__dict__["_rheo_from"] = bits, origin
            return out
        if out_bits < bits:  # the call made the lower precision
            bits, origin = out_bits, f"torch {name} in {precision_name(out_bits)} at {call_site()}"
        out.__dict__["_rheo_bits"], out.__dict__["_rheo_from"] = bits, origin
        return out
    if bits == 53 or random:
        return out
    if isinstance(out, float) and name == "item":
        return Tainted.of(out, bits, origin)
    if isinstance(out, list) and name == "tolist":
        return _tainted_list(out, bits, origin)
    if isinstance(out, float) or (
        isinstance(out, np.ndarray) and out.dtype.kind == "f" and dtype_bits(out.dtype) > bits
    ):
        # float() must return a plain float, and a NumPy array promoted from it forgets it: the value
        # leaves what the gate follows, so its precision counts as reaching the randomness
        trace.note_bits(bits, origin, f"a value read out of torch (torch {name}; not followed further)")
        return out
    if isinstance(out, tuple):
        for x in out:
            if isinstance(x, torch.Tensor) and not _random(x) and x.is_floating_point():
                x.__dict__["_rheo_bits"], x.__dict__["_rheo_from"] = min(bits, _tensor_bits(x)), origin
    return out


def _tainted_list(xs: list, bits: int, origin: str) -> list:
    return [
        Tainted.of(x, bits, origin)
        if isinstance(x, float)
        else _tainted_list(x, bits, origin)
        if isinstance(x, list)
        else x
        for x in xs
    ]
