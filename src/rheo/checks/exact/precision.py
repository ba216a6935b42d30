"""The float precision that reached a run's randomness, found by the gate (docs/gate.md,
"The tolerance the gate finds"). An exact enumeration computes the law the implementation's
own arithmetic gives; where that arithmetic is float32 (a softmax in float32, promoted to
float64 before a coin meets it; a float32 table; a race over float32 keys), the law is off
the target by float32 rounding, and the verdict's tolerance must follow it. Where every
value that meets a random value is float64 end to end, the tolerance stays float64's, so
that a deviation of 1e-6 in float64 arithmetic is still a finding.

How a precision travels (``precision_torch.carried``, called by the tracer's torch mode after
each torch call of a run): every floating tensor has its dtype's mantissa bits, or fewer where it was
computed from lower-precision values (``x32.double()``, ``p / q32``): those carry
``_rheo_bits`` and ``_rheo_from`` (the call that first made the lower precision, with its
file:line). A Python number read from such a tensor (``.item()``, ``float()``, ``.tolist()``)
is a ``Tainted`` float that keeps both through arithmetic (``min(1.0, w * p / q)``). Where a
value meets a random value (a threshold compared with it, a constant in its map, the
weights of a categorical draw, the keys of a race), its bits are noted on the run's trace
with where it came from and where it reached the randomness (``Trace.note_bits``).

What is not seen: a precision that travels through NumPy float64 arrays made from float32
ones, or through ``math`` functions of a tainted float; there, ``exact_tolerance`` on the
implementation says it (docs/adapters.md).

Worked example (``examples/without_replacement.py``, ``BatchedSampledTree``): the draft law
is ``softmax(torch.as_tensor(logits, dtype=torch.float32) / T)`` (the ``as_tensor`` call
makes float32 from the gate's float64 logits: 24 bits), and its log is a constant in the
map of the Gumbel keys' uniforms: the run's precision is float32, "torch as_tensor in
float32 at examples/without_replacement.py:<the line of _law>, reaching the map of a random
value at <the keys' line>", and the tolerance 1e-6.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

MANTISSA_BITS = {"float64": 53, "float32": 24, "bfloat16": 8, "float16": 11}
TOLERANCE = {53: 1e-9, 24: 1e-6}  # an exact verdict's float tolerance, by the lowest precision found
NAMES = {53: "float64", 24: "float32", 11: "float16", 8: "bfloat16"}


@dataclass(frozen=True)
class Precision:
    """The lowest precision found in a part of a certification, and where it came from."""

    bits: int = 53
    origin: str = ""

    def lower(self, other: Precision) -> Precision:
        return other if other.bits < self.bits else self

    @property
    def name(self) -> str:
        return precision_name(self.bits)

    @property
    def tolerance(self) -> float:
        return tolerance_of(self.bits)

    def source(self) -> str:
        """``tolerance_from``: the precision and where it came from (float64: nothing lower met
        a random value)."""
        if self.bits >= 53:
            return "float64: no value of lower precision met a random value"
        return f"{self.name}: {self.origin}" if self.origin else self.name


def tolerance_of(bits: int) -> float:
    """The float tolerance of an exact verdict whose lowest precision is ``bits``: 1e-9 for
    float64, 1e-6 for float32, 1e-2 for 16-bit floats."""
    return TOLERANCE.get(bits, 1e-2 if bits < 24 else 1e-6)


def precision_name(bits: int) -> str:
    return NAMES.get(bits, f"{bits}-bit")


@functools.cache
def dtype_bits(dtype: Any) -> int:
    """Mantissa bits of a float dtype (torch or NumPy; 53 for anything else)."""
    return MANTISSA_BITS.get(str(dtype).replace("torch.", ""), 53)


class Tainted(float):
    """A Python float read from a lower-precision tensor: ``_rheo_bits`` and ``_rheo_from``
    kept through arithmetic with plain numbers (the lowest of two tainted operands)."""

    _rheo_bits: int
    _rheo_from: str

    @staticmethod
    def of(value: float, bits: int, origin: str) -> Tainted:
        out = Tainted(value)
        out._rheo_bits, out._rheo_from = bits, origin
        return out

    def _with(self, value: Any, other: Any) -> Any:
        if not isinstance(value, float):
            return value
        bits, origin = self._rheo_bits, self._rheo_from
        ob = getattr(other, "_rheo_bits", 53)
        if ob < bits:
            bits, origin = ob, other._rheo_from
        return Tainted.of(value, bits, origin)

    def __neg__(self) -> Any:
        return self._with(-float(self), None)

    def __abs__(self) -> Any:
        return self._with(abs(float(self)), None)

    def __reduce__(self) -> tuple:  # pickled (a worker's result) as a plain float
        return (float, (float(self),))


def _carrying(op: str) -> Any:
    """``Tainted``'s binary operator ``op``: float's, its result tainted by the lower operand."""
    plain = getattr(float, op)

    def carry(self: Tainted, o: Any, *mod: Any) -> Any:
        return self._with(plain(self, o, *mod), o)

    carry.__name__ = op
    return carry


for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
    for _side in ("", "r"):
        setattr(Tainted, f"__{_side}{_op}__", _carrying(f"__{_side}{_op}__"))


def operand_bits(x: Any) -> tuple[int, str]:
    """(bits, where they came from) of a value that meets a random value: a tensor's (its
    dtype, or the lower precision it was computed from), a ``Tainted`` float's, a NumPy
    array's or scalar's dtype; (53, "") for plain Python numbers and anything else."""
    bits = getattr(x, "_rheo_bits", None)
    if bits is not None:
        return int(bits), str(getattr(x, "_rheo_from", ""))
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return 53, ""
    b = dtype_bits(dtype)
    if b == 53:
        return 53, ""
    kind = "tensor" if type(x).__module__.startswith("torch") else "array"
    return b, f"a {precision_name(b)} {kind}"


def note_weights(trace: Any, weights: Any) -> None:
    """The precision of a categorical draw's weights met the randomness: an array's dtype, or
    the lowest of a list's ``Tainted`` floats (``trace``: a ``random_values.Trace``)."""
    if isinstance(weights, (list, tuple)):
        for x in weights:
            note_weights(trace, x)
    else:
        trace.note_operand(weights, "the weights of a categorical draw")
