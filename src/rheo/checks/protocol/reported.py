"""Values an implementation reports beside its tokens (docs/adapters.md, "Reported values"):
log-probabilities, checked on every run of every check that reads a cycle's output.

A ``cycle`` (or a ``cycle_batch`` row) may answer a dict with ``tokens`` and

- ``logprobs``: one float per emitted token, log p(token | the tokens before it in the cycle);
- ``top_logprobs``: one {token id: log p} dict per emitted token (top-n), each entry checked
  the same way.

The implementation says which law they are of with ``logprobs = "processed"`` (the law it
samples: p_T after temperature, filters and sampling parameters, or its ``sampler_law``) or
``logprobs = "raw"`` (the softmax of the untempered target logits, what engines call raw
logprobs). Each must equal log p of that law within ``logprob_tolerance`` (absolute, in log
space; default ``LOGPROB_TOLERANCE``, float32's rounding of a log-softmax with room). A
value of a token the law gives probability 0 must be -inf.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rheo.checks.protocol.inputs import raw_logits
from rheo.checks.protocol.judged import judged_instance
from rheo.checks.protocol.outputs import BadOutput
from rheo.reference.instance import Instance

KINDS = ("processed", "raw")
LOGPROB_TOLERANCE = 1e-4


def _expected(impl: Any, inst: Instance, kind: str, prefix: tuple[int, ...], token: int) -> float:
    if kind == "raw":
        logits = raw_logits(inst, prefix)
        top = float(np.max(logits))
        if not math.isfinite(top):
            return -math.inf
        return float(logits[token] - top - math.log(float(np.sum(np.exp(logits - top)))))
    held = getattr(inst, "_judged_for_logprobs", None)  # kept on the instance: its target laws are cached there
    if held is None or held[0] is not impl.obj:
        held = (impl.obj, judged_instance(impl, inst))
        inst._judged_for_logprobs = held  # type: ignore[attr-defined]
    p = float(held[1].target_law(prefix)[token])
    return math.log(p) if p > 0 else -math.inf


def check_reported(impl: Any, inst: Instance, res: Any, tokens: tuple, what: str) -> None:
    """Raise BadOutput naming the first reported log-probability that is not the declared
    law's (module docstring); nothing when ``res`` reports none."""
    if impl is None or not isinstance(res, dict) or not ({"logprobs", "top_logprobs"} & set(res)):
        return
    kind = getattr(impl.obj, "logprobs", None)
    if kind not in KINDS:
        raise BadOutput(
            f'{what}: logprobs are reported, so say which law they are of: logprobs = "processed" or "raw" '
            f"on the implementation (got {kind!r})"
        )
    tol = float(getattr(impl.obj, "logprob_tolerance", LOGPROB_TOLERANCE))
    entries: list[tuple[int, int, Any]] = []  # (position, token, reported value)
    if "logprobs" in res:
        values = list(np.asarray(res["logprobs"], dtype=np.float64).reshape(-1))
        if len(values) != len(tokens):
            raise BadOutput(f"{what}: logprobs holds {len(values)} values for {len(tokens)} tokens")
        entries += [(i, t, v) for i, (t, v) in enumerate(zip(tokens, values))]
    if "top_logprobs" in res:
        rows = list(res["top_logprobs"])
        if len(rows) != len(tokens):
            raise BadOutput(f"{what}: top_logprobs holds {len(rows)} rows for {len(tokens)} tokens")
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise BadOutput(f"{what}: top_logprobs[{i}] must be a dict {{token id: logprob}}")
            entries += [(i, int(t), float(v)) for t, v in row.items()]
    for i, token, value in entries:
        if not 0 <= token < inst.n:
            raise BadOutput(f"{what}: a logprob of token {token}, outside the vocabulary 0..{inst.n - 1}")
        want = _expected(impl, inst, kind, tuple(tokens[:i]), token)
        got = float(value)
        same = (got == want) if math.isinf(want) or math.isinf(got) else abs(got - want) <= tol
        if not same:
            raise BadOutput(
                f"{what}: the {kind} logprob of token {token} at position {i} (after {list(tokens[:i])}) is "
                f"reported as {got:.6g}, but log p = {want:.6g} (tolerance {tol:g})"
            )
