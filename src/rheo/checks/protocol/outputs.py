"""Reading what an implementation returns, strictly: integer columns are integers (never
floats or strings converted), parents form a tree, tokens lie in the vocabulary, a sample's
residual law is a law, an accepted path walks down the tree and the emitted tokens follow
it. Anything else raises ``BadOutput`` naming the field.
"""

from __future__ import annotations

import numpy as np

from rheo.checks.protocol.inputs import KIND_NAMES, KINDS
from rheo.reference.instance import Instance


class BadOutput(ValueError):
    """The implementation returned something outside the protocol."""


def field_of(obj, name):
    value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
    if value is None:
        raise BadOutput(f"missing {name!r}")
    return value


SUM_TOLERANCE = 1e-6  # a sample's residual law (sample_probs row) must sum to 1 within this


def shortened(value: object, width: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def int_column(value: object, name: str) -> list[int]:
    """A 1-D array of integers (Python ints or a NumPy / torch integer dtype): floats,
    strings and booleans are refused, never converted. A [1, n] array is read as [n]."""
    a = np.asarray(value)
    if a.ndim == 2 and a.shape[0] == 1:
        a = a[0]
    if a.ndim != 1:
        raise BadOutput(f"{name} has shape {a.shape}, expected a 1-D array")
    if a.size and not (np.issubdtype(a.dtype, np.integer) and a.dtype != np.bool_):
        raise BadOutput(f"{name} must hold integers; got {a.dtype} values such as {shortened(a.reshape(-1)[0])}")
    return [int(x) for x in a]


def read_tree(tree, inst: Instance) -> dict:
    """Check an implementation's tree (integer columns of one length, parents forming a
    tree, kinds and tokens in range, each sample's residual law finite, non-negative and
    summing to 1 within ``SUM_TOLERANCE``) and add token paths and slot paths."""
    cols = {name: int_column(field_of(tree, name), name) for name in ("tokens", "parents", "kinds", "slots")}
    R = len(cols["tokens"])
    if any(len(v) != R for v in cols.values()):
        raise BadOutput(f"tokens, parents, kinds and slots must have one length; got {[len(v) for v in cols.values()]}")
    raw_probs = np.asarray(field_of(tree, "sample_probs"))
    if raw_probs.size and not np.issubdtype(raw_probs.dtype, np.floating):
        raise BadOutput(f"sample_probs must hold floats; got {raw_probs.dtype}")
    probs = raw_probs.astype(np.float64)
    if probs.shape != (R, inst.n):
        raise BadOutput(f"sample_probs has shape {probs.shape}, expected [R, V] = [{R}, {inst.n}]")
    for i in range(R):
        if not (-1 <= cols["parents"][i] < R) or cols["parents"][i] == i:
            raise BadOutput(f"node {i}: parent {cols['parents'][i]} is not -1 or another node's index")
        if cols["kinds"][i] not in KIND_NAMES:
            raise BadOutput(f"node {i}: kind {cols['kinds'][i]} is not 0 (lead), 1 (sample) or 2 (fill)")
        if not 0 <= cols["tokens"][i] < inst.n:
            raise BadOutput(f"node {i}: token {cols['tokens'][i]} is outside the vocabulary 0..{inst.n - 1}")
        if cols["kinds"][i] == KINDS["sample"]:
            row = probs[i]
            if not np.isfinite(row).all() or (row < 0).any() or abs(float(row.sum()) - 1) > SUM_TOLERANCE:
                raise BadOutput(
                    f"node {i}: sample_probs row {shortened(np.round(row, 6).tolist(), 80)} is not a law (finite, "
                    f"non-negative, summing to 1 within {SUM_TOLERANCE:g})"
                )
    order = _draw_order(tree, cols, R)
    paths, slot_paths = [], []
    for i in range(R):
        path: list[int] = []
        slots: list[int] = []
        j = i
        while j != -1:
            if len(path) > R:
                raise BadOutput(f"node {i}: its parents form a cycle")
            path.append(cols["tokens"][j])
            slots.append(cols["slots"][j])
            j = cols["parents"][j]
        paths.append(tuple(reversed(path)))
        slot_paths.append(tuple(reversed(slots)))
    out = {**cols, "sample_probs": probs, "paths": paths, "slot_paths": slot_paths}
    if order is not None:
        out["draw_order"] = order
    return out


VERIFY_COLUMNS = ("tokens", "parents", "kinds", "slots", "sample_probs")  # what verify gets of a tree


def verify_nodes(tree: dict) -> dict:
    """The columns of a checked tree that ``verify`` is handed: ``VERIFY_COLUMNS``, and
    ``draw_order`` where the builder gave one."""
    return {k: tree[k] for k in (*VERIFY_COLUMNS, "draw_order") if k in tree}


def _draw_order(tree, cols: dict, R: int) -> list[int] | None:
    """The optional ``draw_order`` column (docs/gate.md, "Nodes that draw several
    children"): for each sampled node, the place it was drawn in among its parent's
    sampled children (0 first; the siblings' places 0..n-1, each once), -1 for a lead or fill.
    None where the tree has none."""
    raw = tree.get("draw_order") if isinstance(tree, dict) else getattr(tree, "draw_order", None)
    if raw is None:
        return None
    order = int_column(raw, "draw_order")
    if len(order) != R:
        raise BadOutput(f"draw_order has {len(order)} entries, expected one per node ({R})")
    places: dict[int, list[int]] = {}
    for i in range(R):
        sampled = cols["kinds"][i] == KINDS["sample"]
        if sampled != (order[i] >= 0) or order[i] < -1:
            want = "its place among its parent's sampled children (0 first)" if sampled else "-1 (not sampled)"
            raise BadOutput(f"node {i}: draw_order {order[i]} must be {want}")
        if sampled:
            places.setdefault(cols["parents"][i], []).append(order[i])
    for parent, got in places.items():
        if sorted(got) != list(range(len(got))):
            where = "the root" if parent == -1 else f"node {parent}"
            raise BadOutput(f"draw_order: the sampled children of {where} are at {sorted(got)}, not 0..{len(got) - 1}")
    return order


def read_result(res, tree: dict, n: int) -> tuple[tuple, list]:
    """(tokens, accepted) of a verifier's result, checked against the tree it was given:
    integer token ids in the vocabulary, accepted indices that walk down from the root,
    each accepted node's token emitted in turn, then exactly one bonus or correction token."""
    tokens = tuple(int_column(field_of(res, "tokens"), "tokens"))
    accepted = int_column(field_of(res, "accepted"), "accepted")
    for t in tokens:
        if not 0 <= t < n:
            raise BadOutput(f"tokens: {t} is outside the vocabulary 0..{n - 1}")
    parents, tree_tokens = [int(x) for x in tree["parents"]], [int(x) for x in tree["tokens"]]
    parent = -1
    for i in accepted:
        if not 0 <= i < len(parents) or parents[i] != parent:
            where = "the root" if parent == -1 else f"node {parent}"
            raise BadOutput(
                f"accepted: {accepted} is not a path down the tree: node {shortened(i)} is not a child of {where}"
            )
        parent = i
    if len(tokens) != len(accepted) + 1:
        raise BadOutput(
            f"tokens: {list(tokens)} must be the {len(accepted)} accepted tokens then one bonus or correction token"
        )
    for k, i in enumerate(accepted):
        if tokens[k] != tree_tokens[i]:
            raise BadOutput(f"tokens: token {k} is {tokens[k]}, but the accepted node {i} holds token {tree_tokens[i]}")
    return tokens, accepted
