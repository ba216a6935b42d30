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

from rheo.checks.exact.precision import MANTISSA_BITS, Tainted, dtype_bits, operand_bits, precision_name
from rheo.checks.exact.random_values import Trace, call_site

_FLOAT_BITS = {getattr(torch, name): bits for name, bits in MANTISSA_BITS.items()}  # the floating dtypes
_REACHED = {"lt": "a threshold", "le": "a threshold", "gt": "a threshold", "ge": "a threshold", "eq": "a threshold"}
_REACHED |= {"argmax": "a race", "argmin": "a race", "topk": "a race", "sort": "a race", "argsort": "a race"}


def _operands(args: tuple, kwargs: dict) -> tuple[int, str, bool]:
    """(lowest bits, where they came from, whether a random tensor is among them) of a torch
    call's floating operands: tensors, ``Tainted`` floats and NumPy floats, in nested lists
    and tuples too (a list made from ``q32.tolist()`` keeps its precision). A random tensor's
    own dtype is not counted (its uniforms' precision is the race's or the backend law's),
    only the constants already in its map (``_rheo_bits``). Run after every torch call of a
    run: tensors are read from their ``__dict__`` and the common case does no other work."""
    bits, origin, random = 53, "", False
    todo = [*args, *kwargs.values()] if kwargs else list(args)
    while todo:
        y = todo.pop()
        if isinstance(y, torch.Tensor):
            d = y.__dict__
            if "_rheo_trace" in d:
                random = True
                b = d.get("_rheo_bits", 53)
                if b < bits:
                    bits, origin = b, d.get("_rheo_from", "")
            elif min(_FLOAT_BITS.get(y.dtype, 53), d.get("_rheo_bits", 53)) < bits:
                bits, origin = operand_bits(y)
        elif isinstance(y, (list, tuple)):
            todo.extend(y)
        elif isinstance(y, (Tainted, np.ndarray, np.floating)) and operand_bits(y)[0] < bits:
            bits, origin = operand_bits(y)
    return bits, origin, random


def _random(x: Any) -> bool:
    """A random tensor of the symbolic tracer (``random_values_torch.SymTensor``)."""
    return isinstance(x, torch.Tensor) and "_rheo_trace" in x.__dict__


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
                x.__dict__["_rheo_bits"], x.__dict__["_rheo_from"] = min(bits, _FLOAT_BITS.get(x.dtype, 53)), origin
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
