"""The calls into an implementation, each watched (``rheo.checks.protocol.watch``) and its
answer read strictly (``rheo.checks.protocol.outputs``): ``build_tree``, ``verify``,
``cycle``, ``sampler_law``, and ``impl_cycle``, one cycle with the implementation's parts
(the reference fills in a part it does not provide).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rheo.checks.protocol.inputs import (
    KIND_NAMES,
    draft_logits_fn,
    protocol_config,
    protocol_uniforms,
    reference_tree,
    target_logits,
    target_logits_fn,
)
from rheo.checks.protocol.load import Implementation, message_of
from rheo.checks.protocol.outputs import (
    BadOutput,
    field_of,
    int_column,
    read_result,
    read_tree,
    shortened,
    verify_nodes,
)
from rheo.checks.protocol.reported import check_reported
from rheo.checks.protocol.sampler_law import SAMPLER_LAW_TOLERANCE as SAMPLER_LAW_TOLERANCE  # where it was
from rheo.checks.protocol.sampler_law import call_sampler_law as call_sampler_law  # where it was
from rheo.checks.protocol.watch import watched
from rheo.reference import UniformChooser, Uniforms, walk
from rheo.reference.instance import Instance
from rheo.reference.tree import LabelledTree
from rheo.reference.tree import build_tree as reference_build_tree


def call_build_tree(impl: Implementation, inst: Instance, uniforms: Uniforms) -> dict:
    """The implementation's tree for ``inst`` on these uniforms, checked (``read_tree``)."""
    raw = watched(
        "build_tree",
        inst,
        impl.obj.build_tree,
        draft_logits_fn(inst),
        protocol_config(inst),
        inst.config.temperature.value,
        np.array(uniforms.u_draw, dtype=np.float64),
    )
    return read_tree(raw, inst)


def call_verify(impl: Implementation, inst: Instance, tree: dict, uniforms: Uniforms) -> tuple[tuple, list]:
    """(emitted tokens, accepted node indices) of the implementation's verifier on ``tree``."""
    res = watched(
        "verify",
        inst,
        impl.obj.verify,
        verify_nodes(tree),
        target_logits(inst, tree["paths"]),
        protocol_config(inst),
        inst.config.temperature.value,
        protocol_uniforms(uniforms),
    )
    return read_result(res, tree, inst.n)


def call_cycle(impl: Implementation, inst: Instance) -> tuple:
    """The tokens one whole cycle of the implementation emits (``cycle``), checked: integer
    ids in the vocabulary, 1 to D+1 of them."""
    res = watched(
        "cycle",
        inst,
        impl.obj.cycle,
        draft_logits_fn(inst),
        target_logits_fn(inst),
        protocol_config(inst),
        inst.config.temperature.value,
    )
    return _cycle_tokens(inst, res, impl=impl)


def _cycle_tokens(inst: Instance, res: Any, what: str = "tokens", impl: Implementation | None = None) -> tuple:
    """The emitted tokens, checked (1 to D+1 ids in the vocabulary), and the log-probabilities
    reported beside them (``rheo.checks.protocol.reported``)."""
    tokens = tuple(int_column(field_of(res, "tokens") if isinstance(res, dict) else res, what))
    L = inst.seq_len
    if not 1 <= len(tokens) <= L:
        raise BadOutput(f"{what}: {shortened(list(tokens))} must hold 1 to depth + 1 = {L} tokens, got {len(tokens)}")
    for t in tokens:
        if not 0 <= t < inst.n:
            raise BadOutput(f"{what}: {t} is outside the vocabulary 0..{inst.n - 1}")
    check_reported(impl, inst, res, tokens, what)
    return tokens


def mixed_batches(impl: Implementation) -> bool:
    """The implementation's ``cycle_batch`` takes rows that are different cases
    (``mixed_batches = True``): per-row lists of draft and target logits, configs and
    temperatures (docs/adapters.md, "Mixed batches")."""
    return callable(getattr(impl.obj, "cycle_batch", None)) and bool(getattr(impl.obj, "mixed_batches", False))


def call_cycle_rows(impl: Implementation, inst: Instance, rows: int) -> list[tuple]:
    """``cycle_batch``: ``rows`` copies of one cycle in one call of the engine (each row its
    own draws, row r's the r-th slice of every draw; ``rheo.checks.exact.concrete``), each
    row's tokens checked as ``call_cycle`` checks them. An implementation that takes mixed
    batches gets the copies as per-row lists (``call_cycle_mixed``)."""
    if mixed_batches(impl):
        return call_cycle_mixed(impl, [inst] * rows)
    res = watched(
        "cycle_batch",
        inst,
        impl.obj.cycle_batch,
        draft_logits_fn(inst),
        target_logits_fn(inst),
        protocol_config(inst),
        inst.config.temperature.value,
        rows,
    )
    if not isinstance(res, (list, tuple)) or len(res) != rows:
        raise BadOutput(f"cycle_batch: must return a list of {rows} token lists (one per row), got {shortened(res)}")
    return [_cycle_tokens(inst, r, f"cycle_batch row {i} tokens", impl) for i, r in enumerate(res)]


def call_cycle_mixed(impl: Implementation, insts: list[Instance], seeds: list[int] | None = None) -> list[tuple]:
    """``cycle_batch`` of an implementation that takes mixed batches: row r is the request of
    ``insts[r]``: ``draft_logits[r]``, ``target_logits[r]``, ``config[r]`` (with
    ``config[r]["seed"]`` = ``seeds[r]`` when seeds are given: the row's own generator) and
    ``temperature[r]``; each row's tokens checked as ``call_cycle`` checks them."""
    configs = [protocol_config(inst) for inst in insts]
    if seeds is not None:
        configs = [{**config, "seed": int(seed)} for config, seed in zip(configs, seeds)]
    rows = len(insts)
    res = watched(
        "cycle_batch",
        insts[0],
        impl.obj.cycle_batch,
        [draft_logits_fn(inst) for inst in insts],
        [target_logits_fn(inst) for inst in insts],
        configs,
        [inst.config.temperature.value for inst in insts],
        rows,
    )
    if not isinstance(res, (list, tuple)) or len(res) != rows:
        raise BadOutput(f"cycle_batch: must return a list of {rows} token lists (one per row), got {shortened(res)}")
    return [_cycle_tokens(inst, r, f"cycle_batch row {i} tokens", impl) for i, (inst, r) in enumerate(zip(insts, res))]


def impl_cycle(impl: Implementation, inst: Instance, uniforms: Uniforms) -> tuple:
    """One cycle's output with the implementation's parts (the reference fills in a part it
    does not provide). ``inst`` may be a ``judged_instance``: the reference's verifier then
    targets the implementation's sampler law. NotImplementedError passes through; a crash
    or a malformed answer raises BadOutput naming the entry point."""
    if impl.runs_cycles:
        return _guarded("cycle", call_cycle, impl, inst)
    return tree_cycle(impl, inst, uniforms)[1]


def tree_cycle(impl: Implementation, inst: Instance, uniforms: Uniforms) -> tuple[dict, tuple, list]:
    """``impl_cycle`` for an implementation with ``build_tree`` and/or ``verify``, with what
    it went through: (the tree, the emitted tokens, the accepted nodes: indices into the
    tree from ``verify``, slot paths from the reference's walk)."""
    if impl.builds_trees:
        got = _guarded("build_tree", call_build_tree, impl, inst, uniforms)
    else:
        got = reference_tree(inst, reference_build_tree(inst, UniformChooser(uniforms)))
    if impl.verifies:
        tokens, accepted = _guarded("verify", call_verify, impl, inst, got, uniforms)
        return got, tuple(tokens), accepted
    labelled = LabelledTree((s, p[-1], KIND_NAMES[k]) for s, p, k in zip(got["slot_paths"], got["paths"], got["kinds"]))
    out, walked = walk(inst, labelled, UniformChooser(uniforms))
    return got, tuple(out), list(walked)


def _guarded(what: str, fn, *args):
    try:
        return fn(*args)
    except NotImplementedError:
        raise
    except BadOutput as e:
        raise BadOutput(f"{what} returned a malformed answer: {e}") from None
    except Exception as e:  # the implementation crashed: a finding, with its message
        raise BadOutput(f"{what} raised {type(e).__name__}: {message_of(e)}") from None
