"""A draft tree that shows a finding: one cycle of the implementation whose emitted tokens
begin the worst sequence of an output-law or exact finding, with its accepted path, drawn
beside the sequences (``rheo.checks.gate.pictures``, the ``worst_tree`` of a counterexample
file). Only for implementations that build or verify trees; a ``cycle`` implementation
returns tokens alone, so there is no tree to show.

The cycle is found by running the implementation on fresh uniforms (its own randomness,
where it has it) looking for the longest prefix of the sequence, at most ``TRIES`` times (and ``SECONDS``); the
parts it does not provide are the reference's, as in every check (``impl_cycle``).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from rheo.checks.protocol.calls import tree_cycle
from rheo.checks.protocol.load import Implementation
from rheo.reference import Uniforms
from rheo.reference.instance import Instance

TRIES = 3000  # cycles tried before giving up (a prefix of probability 1/650 is found with 99% chance)
SECONDS = 3.0  # and at most this long (a finding waits for its picture no longer)


def example_tree(impl: Implementation, inst: Instance, sequence: tuple[int, ...], seed: int = 0) -> dict | None:
    """``worst_tree`` for ``sequence`` (the format of ``rheo.checks.gate.pictures``): the
    tree of one cycle that emits the longest prefix of ``sequence`` found (the whole of it
    ends the search), its accepted nodes, the emitted tokens and whether the last is a
    bonus or a correction, and at which node; None for a ``cycle`` implementation, or when
    no cycle in ``TRIES`` (and ``SECONDS``) emits such a prefix, or the implementation fails
    on the way (the finding itself says how)."""
    if impl.runs_cycles or not (impl.builds_trees or impl.verifies):
        return None
    rng = np.random.default_rng(seed)
    c = inst.config
    stop = time.monotonic() + SECONDS
    best: dict | None = None
    for attempt in range(TRIES):
        if time.monotonic() > stop:
            break
        u = Uniforms.random(rng, c.K, c.B, c.depth)
        try:
            tree, emitted, accepted = tree_cycle(impl, inst, u)
        except Exception:  # the finding reports a broken implementation; no picture of it
            return None
        if tuple(emitted) != tuple(sequence[: len(emitted)]) or (best and len(emitted) <= len(best["emitted"])):
            continue
        if not impl.verifies:  # the reference's walk names accepted nodes by slot path
            rows = {sp: i for i, sp in enumerate(tree["slot_paths"])}
            accepted = [rows[sp] for sp in accepted]
        leaf = accepted[-1] if accepted else -1
        has_children = any(int(p) == leaf for p in tree["parents"])
        best = {
            "tokens": [int(x) for x in tree["tokens"]],
            "parents": [int(x) for x in tree["parents"]],
            "kinds": [int(x) for x in tree["kinds"]],
            "slots": [int(x) for x in tree["slots"]],
            "accepted": [int(i) for i in accepted],
            "emitted": [int(t) for t in emitted],
            "last": "correction" if has_children else "bonus",
            "last_at": "the root" if leaf == -1 else f"node {leaf}",
            "note": f"one cycle of {impl.name} (uniforms #{attempt}) that emits {' '.join(map(str, emitted))}",
        }
        if len(emitted) >= len(sequence):
            break
    return best


def path_line(tree: dict) -> str:
    """The path of a ``worst_tree`` in words: the accepted nodes and where the last token
    came from, e.g. "accepted nodes 0 > 2 (tokens 1 0), then a correction at node 2"."""
    acc = tree["accepted"]
    head = (
        "no draft accepted"
        if not acc
        else f"accepted node{'s' if len(acc) > 1 else ''} {' > '.join(map(str, acc))} "
        f"(token{'s' if len(acc) > 1 else ''} {' '.join(str(tree['tokens'][i]) for i in acc)})"
    )
    where = tree.get("last_at") or ("the root" if not acc else f"node {acc[-1]}")
    return f"{head}, then a {tree['last']} token {tree['emitted'][-1]} at {where}"


def with_example_tree(payload: dict[str, Any], impl: Implementation, inst: Instance, sequence) -> dict[str, Any]:
    """``payload`` with its ``worst_tree`` (when one is found)."""
    tree = example_tree(impl, inst, tuple(int(t) for t in sequence))
    return payload if tree is None else {**payload, "worst_tree": tree}
