"""Whole generations (the protocol's ``generate``): the number of tokens a case asks for
(``n_tokens_of``), the logits the implementation is given as functions of token paths from
the generation's start (``generation_logits_fns``), the call itself read strictly
(``call_generate``, ``impl_generate``), and the n-token target law it is judged against
(``generation_sequence_law``, docs/spec.md §5 and §8).
"""

from __future__ import annotations

import numpy as np

from rheo.checks.protocol.calls import _guarded
from rheo.checks.protocol.inputs import logits_of, protocol_config
from rheo.checks.protocol.load import Implementation
from rheo.checks.protocol.outputs import BadOutput, field_of, int_column, shortened
from rheo.checks.protocol.watch import watched
from rheo.reference.instance import Instance, Table
from rheo.reference.numbers import CaseError
from rheo.reference.params import Prefix
from rheo.reference.stops import Stops


def n_tokens_of(case: dict) -> int:
    """The tokens one generation of ``case`` emits: its "n_tokens", default depth + 1
    (docs/spec.md §8)."""
    n = case.get("n_tokens")
    return int(case["depth"]) + 1 if n is None else int(n)


def generation_config(inst: Instance, n_tokens: int) -> dict:
    """The config dict ``generate`` receives: ``protocol_config`` plus "n_tokens" (max_tokens),
    and where the case has stops (``inst.stops``, set by ``law_instance``) "stop_token_ids"
    and "stop_sequences"."""
    config = {**protocol_config(inst), "n_tokens": int(n_tokens)}
    stops = getattr(inst, "stops", None)
    if stops is not None:
        config["stop_token_ids"] = sorted(stops.token_ids)
        config["stop_sequences"] = [list(seq) for seq in stops.sequences]
    return config


def covered_law(table: Table, path: Prefix, n_tokens: int):
    """The law the generation's logits give at ``path``: the table's at the longest prefix
    of ``path`` of length at most n_tokens - 1 that the table gives (the tokens after the
    n-th never count, so the laws past n_tokens - 1 cannot change the n-token law; a draft
    table that stops earlier, as a single cycle's does at depth - 1, answers with its
    deepest law on that path, which changes only what is drafted, never the judged law)."""
    cut = tuple(path[: max(0, n_tokens - 1)])
    while True:
        try:
            return table(cut)
        except CaseError:
            if not cut:
                raise
            cut = cut[:-1]


def generation_logits_fns(inst: Instance, n_tokens: int):
    """(draft_logits, target_logits): paths from the generation's start -> [len(paths), V]
    float64 logits (untruncated, untempered, unfiltered; -inf = probability 0)."""

    def fn(table: Table, raw: bool = False):
        def logits(paths):
            rows = [covered_law(table, tuple(int(t) for t in p), n_tokens) for p in paths]
            return np.stack([np.array(r, dtype=np.float64) if raw else logits_of(r) for r in rows])

        return logits

    if inst.target_logits is not None:  # the case's raw logits (docs/spec.md §9), as for cycles
        return fn(inst.draft), fn(inst.target_logits, raw=True)
    return fn(inst.draft), fn(inst.target)


def _read_generation(res, n_tokens: int, V: int, stops: Stops | None = None) -> tuple[int, ...]:
    tokens = tuple(int_column(field_of(res, "tokens") if isinstance(res, dict) else res, "tokens"))
    for t in tokens:
        if not 0 <= t < V:
            raise BadOutput(f"tokens: {t} is outside the vocabulary 0..{V - 1}")
    if stops is None:
        if len(tokens) != n_tokens:
            raise BadOutput(
                f"tokens: {shortened(list(tokens))} must hold n_tokens = {n_tokens} tokens, got {len(tokens)}"
            )
        return tokens
    if not 1 <= len(tokens) <= n_tokens:
        raise BadOutput(f"tokens: {len(tokens)} tokens, past max_tokens (n_tokens = {n_tokens})")
    for i in range(1, len(tokens)):
        if stops.at(tokens[:i]):
            raise BadOutput(
                f"tokens: {shortened(list(tokens))}: {len(tokens) - i} token(s) after the stop at position {i - 1}"
            )
    stopped = stops.at(tokens)
    if not stopped and len(tokens) < n_tokens:
        raise BadOutput(f"tokens: {list(tokens)} ends before n_tokens = {n_tokens} without a stop")
    reason = res.get("finish_reason") if isinstance(res, dict) else None
    if reason is not None and reason != ("stop" if stopped else "length"):
        raise BadOutput(
            f"finish_reason: {reason!r} for {list(tokens)}, which ends "
            + ("at a stop: 'stop'" if stopped else f"at max_tokens = {n_tokens}: 'length'")
        )
    return tokens


def call_generate(impl: Implementation, inst: Instance, n_tokens: int) -> tuple[int, ...]:
    """The tokens one whole generation of the implementation emits (``generate``), checked:
    exactly n_tokens integer ids in the vocabulary (BadOutput otherwise). Whatever the
    implementation raises passes through (the exact check stops runs by raising inside its
    random calls); ``impl_generate`` turns a crash into a finding."""
    draft, target = generation_logits_fns(inst, n_tokens)
    config = generation_config(inst, n_tokens)
    res = watched("generate", inst, impl.obj.generate, draft, target, config, inst.config.temperature.value)
    return _read_generation(res, n_tokens, inst.n, getattr(inst, "stops", None))


def impl_generate(impl: Implementation, inst: Instance, n_tokens: int) -> tuple[int, ...]:
    """``call_generate``, a crash or a malformed answer raised as BadOutput (one line)
    naming ``generate``; NotImplementedError passes through."""
    return _guarded("generate", call_generate, impl, inst, n_tokens)


def generation_sequence_law(inst: Instance, n_tokens: int, stops: Stops | None = None) -> dict[tuple, float]:
    """p_T(Seq) = prod_i p_T(Seq_i | Seq_<i) for every Seq in V^n_tokens of positive mass,
    with ``inst.target_law`` (a ``judged_instance``'s: its sampler law); with ``stops``, the
    stopped process's law: a sequence ends at its first stop, or at n_tokens."""
    out: dict[tuple, float] = {}
    stack: list[tuple[tuple, float]] = [((), 1.0)]
    while stack:
        prefix, pr = stack.pop()
        if len(prefix) == n_tokens or (stops is not None and stops.at(prefix)):
            out[prefix] = pr
            continue
        law = inst.target_law(prefix)
        stack.extend((prefix + (x,), pr * float(law[x])) for x in range(inst.n) if law[x] > 0)
    return out
