"""The call of an implementation's ``sampler_law`` (docs/adapters.md): the law its engine
samples from without speculation, read strictly. Apart from the other calls
(``rheo.checks.protocol.calls``) so that the judged law (``rheo.checks.protocol.judged``) can
be built where a call's output is read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rheo.checks.protocol.load import Implementation, message_of
from rheo.checks.protocol.outputs import BadOutput
from rheo.checks.protocol.watch import watched

SAMPLER_LAW_TOLERANCE = 1e-6  # sampler_law must sum to 1 within this


def call_sampler_law(
    impl: Implementation, logits: np.ndarray, config: dict, temperature: float, history: list[int] | None = None
) -> tuple:
    """``sampler_law`` on one target row, checked (finite, non-negative, length V, sums to 1
    within 1e-6; BadOutput names the field otherwise) and renormalized. ``history`` (prompt
    + generated + path, docs/spec.md §9) is passed as a fourth argument when the method
    takes one (``Implementation.sampler_law_takes_history``)."""
    args: list[Any] = [np.array(logits, dtype=np.float64), dict(config), temperature]
    if impl.sampler_law_takes_history:
        args.append(list(history or []))
    try:
        raw = watched("sampler_law", None, impl.obj.sampler_law, *args)
        p = np.asarray(raw, dtype=np.float64)
    except NotImplementedError:
        raise
    except Exception as e:
        raise BadOutput(f"sampler_law raised {type(e).__name__}: {message_of(e)}") from None
    V = len(logits)
    if p.shape != (V,):
        raise BadOutput(f"sampler_law returned shape {list(p.shape)}, expected [V] = [{V}]")
    bad = np.flatnonzero(~np.isfinite(p))
    if len(bad):
        raise BadOutput(f"sampler_law[{bad[0]}] is {p[bad[0]]}, not a finite number")
    bad = np.flatnonzero(p < 0)
    if len(bad):
        raise BadOutput(f"sampler_law[{bad[0]}] is {p[bad[0]]:.6g}, negative")
    total = float(p.sum())
    if abs(total - 1.0) > SAMPLER_LAW_TOLERANCE:
        raise BadOutput(f"sampler_law sums to {total!r}, not to 1 (within {SAMPLER_LAW_TOLERANCE:g})")
    return tuple(float(x) for x in p / total)
