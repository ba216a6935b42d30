"""What every tree-format converter shares: the engine-format containers (``EagleTree``,
``SGLangTree``), strict readers of integer and float fields that name the field and the
fix, the protocol tree read and checked (``_read_protocol``), and the tree rebuilt from an
engine's parent links with the fields that travel beside it (``_from_engine``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

KIND_NAMES = {0: "lead", 1: "sample", 2: "fill"}
SAMPLE = 1


@dataclass
class EagleTree:
    """One request's draft tree in EAGLE's format (N draft nodes, P root-to-leaf paths).

    EAGLE's tensors:
      draft_tokens:      [1, N+1] int64, index 0 the root token, then the nodes in engine order
      tree_mask:         [1, 1, N+1, N+1] float32, 1 where row i attends to column j: the
                         root, node i's ancestors and itself
      tree_position_ids: [N+1] int64, each node's depth (the root 0); add the root's position
      retrieve_indices:  [P, W] int64, one row per leaf: the indices from the root (0) to the
                         leaf, -1 padded; W = the deepest node's depth + 1; rows sorted
                         lexicographically (so a node's children come in index order)
      candidates:        [P, W] int64, draft_tokens along each row, -1 on padding
    Not in EAGLE's format (what it drops, for the way back), indexed like draft_tokens:
      slots, kinds, node_ids: [N+1] int64 (-1 at the root); node_ids[j] is node j's index
                         in the tree it was converted from
      sample_probs:      [N+1, V] float64 or None (the root's row is 0)
    """

    draft_tokens: torch.Tensor
    tree_mask: torch.Tensor
    tree_position_ids: torch.Tensor
    retrieve_indices: torch.Tensor
    candidates: torch.Tensor | None = None
    slots: torch.Tensor | None = None
    kinds: torch.Tensor | None = None
    node_ids: torch.Tensor | None = None
    sample_probs: torch.Tensor | None = None


@dataclass
class SGLangTree:
    """A batch of draft trees in SGLang's format: bs requests of n = num_draft_tokens entries
    each (the root and the nodes in engine order; a request with fewer nodes is padded).

    SGLang's tensors:
      draft_tokens:         [bs * n] int64, request b's block b*n .. b*n + n - 1, root first
                            (0 on padding)
      positions:            [bs * n] int64, seq_lens[b] + depth (the root seq_lens[b]; padding
                            seq_lens[b])
      tree_mask:            [bs * n * n] bool, the draft-token part of SGLang's mask
                            (TreeMaskMode.QLEN_ONLY): row i of request b is True at the root,
                            node i's ancestors and itself (padding rows: the root and itself)
      retrive_index:        [bs, n] int64, b*n + i: each entry's row in the flattened batch
      retrive_next_token:   [bs, n] int64, the first child's index in the block, -1 none
      retrive_next_sibling: [bs, n] int64, the next sibling's index, -1 none
    Padding entries are reached by no link. Not in SGLang's format, indexed like
    retrive_index (-1 at the root and on padding):
      slots, kinds, node_ids: [bs, n] int64;  sample_probs: [bs, n, V] float64 or None
    """

    draft_tokens: torch.Tensor
    positions: torch.Tensor
    tree_mask: torch.Tensor | None
    retrive_index: torch.Tensor
    retrive_next_token: torch.Tensor
    retrive_next_sibling: torch.Tensor
    slots: torch.Tensor | None = None
    kinds: torch.Tensor | None = None
    node_ids: torch.Tensor | None = None
    sample_probs: torch.Tensor | None = None

    @property
    def num_draft_tokens(self) -> int:
        return int(self.retrive_index.shape[1])


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _ints(value: Any, where: str, ndim: int | tuple[int, ...], fix: str) -> np.ndarray:
    """An integer array of ``ndim`` dimensions (or one of several; a numpy array, a tensor
    or a list)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    a = np.asarray(value)
    dims = (ndim,) if isinstance(ndim, int) else ndim
    if a.ndim not in dims:
        want = " or ".join(map(str, dims))
        raise ValueError(f"{where}: expected {want} dimension(s), got shape {list(a.shape)}; {fix}")
    if a.size and (a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"{where}: expected integers, got {a.dtype}; {fix}")
    return a.astype(np.int64)


def _floats(value: Any, where: str, shape: tuple[int, ...], fix: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    a = np.asarray(value)
    if a.size and not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"{where}: expected floats, got {a.dtype}; {fix}")
    a = a.astype(np.float64)
    if a.ndim != len(shape) or any(s >= 0 and s != t for s, t in zip(shape, a.shape)):
        want = "[" + ", ".join("V" if s < 0 else str(s) for s in shape) + "]"
        raise ValueError(f"{where}: expected shape {want}, got {list(a.shape)}; {fix}")
    if not np.isfinite(a).all():
        raise ValueError(f"{where}: holds a value that is not finite; {fix}")
    return a


def _token(value: Any, where: str) -> int:
    if isinstance(value, torch.Tensor | np.ndarray) and np.asarray(value).size == 1:
        value = np.asarray(value.cpu() if isinstance(value, torch.Tensor) else value).reshape(()).item()
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(f"{where}: expected a token id (an integer >= 0), got {value!r}")
    return int(value)


@dataclass
class _Tree:
    """One protocol tree, checked: node i's token, parent, kind, slot, depth (1 for a child
    of the root) and slot path; sample_probs [R, V] or None."""

    tokens: list[int]
    parents: list[int]
    kinds: list[int]
    slots: list[int]
    sample_probs: np.ndarray | None
    depth: list[int]
    slot_paths: list[tuple[int, ...]]

    def engine_order(self) -> list[int]:
        """The nodes by depth, then slot path: parents first, siblings in slot order."""
        return sorted(range(len(self.tokens)), key=lambda i: (self.depth[i], self.slot_paths[i]))


def _read_protocol(tree: Any, where: str) -> _Tree:
    """Check a protocol tree (the fields of ``rheo.checks.protocol``) and add depths and slot paths."""
    if tree is None:
        raise ValueError(f"{where}: expected a protocol tree (a dict with tokens, parents, kinds, slots), got None")
    cols: dict[str, list[int]] = {}
    for name in ("tokens", "parents", "kinds", "slots"):
        value = _get(tree, name)
        if value is None:
            raise ValueError(f"{where}: missing {name!r}; a protocol tree has tokens, parents, kinds and slots [R]")
        cols[name] = _ints(value, f"{where}.{name}", 1, "give one integer per node").tolist()
    R = len(cols["tokens"])
    if any(len(v) != R for v in cols.values()):
        lengths = {k: len(v) for k, v in cols.items()}
        raise ValueError(f"{where}: tokens, parents, kinds and slots must have one length (R), got {lengths}")
    probs = _get(tree, "sample_probs")
    sample_probs = None
    if probs is not None:
        sample_probs = _floats(probs, f"{where}.sample_probs", (R, -1), "give [R, V] laws (zeros off the samples)")
    tokens, parents, kinds, slots = cols["tokens"], cols["parents"], cols["kinds"], cols["slots"]
    for i in range(R):
        if tokens[i] < 0 or (sample_probs is not None and tokens[i] >= sample_probs.shape[1]):
            top = "" if sample_probs is None else f" and below V = {sample_probs.shape[1]}"
            raise ValueError(f"{where}.tokens: node {i} holds {tokens[i]}; token ids are >= 0{top}")
        if not -1 <= parents[i] < R or parents[i] == i:
            raise ValueError(
                f"{where}.parents: node {i} has parent {parents[i]}; give -1 (the root) or another node 0..{R - 1}"
            )
        if kinds[i] not in KIND_NAMES:
            raise ValueError(f"{where}.kinds: node {i} has kind {kinds[i]}; give 0 (lead), 1 (sample) or 2 (fill)")
        if slots[i] < 0:
            raise ValueError(f"{where}.slots: node {i} has slot {slots[i]}; slots are 0..K-1")
    depth = [0] * R
    for i in range(R):  # walk up to the root; a walk longer than R nodes is a cycle
        j, d = i, 0
        while j != -1:
            d += 1
            if d > R:
                raise ValueError(f"{where}.parents: node {i}'s parents form a cycle; every node must lead up to -1")
            j = parents[j]
        depth[i] = d
    seen: dict[tuple[int, int], int] = {}
    seen_tokens: dict[tuple[int, int], int] = {}
    for i in sorted(range(R), key=lambda i: depth[i]):
        for key, table, what in (
            ((parents[i], slots[i]), seen, "slot"),
            ((parents[i], tokens[i]), seen_tokens, "token"),
        ):
            if key in table:
                under = "the root" if parents[i] == -1 else f"node {parents[i]}"
                raise ValueError(
                    f"{where}.{what}s: nodes {table[key]} and {i}, both children of {under}, hold the same {what} "
                    f"{key[1]}; a node's children hold distinct slots and distinct tokens (docs/spec.md §2)"
                )
            table[key] = i
    slot_paths: list[tuple[int, ...]] = [()] * R
    for i in sorted(range(R), key=lambda i: depth[i]):
        slot_paths[i] = (slot_paths[parents[i]] if parents[i] >= 0 else ()) + (slots[i],)
    return _Tree(tokens, parents, kinds, slots, sample_probs, depth, slot_paths)


def _protocol_dict(t: _Tree) -> dict:
    out: dict[str, np.ndarray] = {
        name: np.array(getattr(t, name), dtype=np.int64) for name in ("tokens", "parents", "kinds", "slots")
    }
    if t.sample_probs is not None:
        out["sample_probs"] = t.sample_probs
    return out


def _from_engine(
    where: str,
    tokens: list[int],
    parent: list[int],
    children: list[list[int]],
    nodes: list[int],
    extras: dict[str, Any],
) -> dict:
    """A protocol tree from one engine tree: ``nodes`` its node indices (the root 0 not
    among them), ``tokens``/``parent`` by engine index (parent 0 = the root), ``children``
    each index's children in the engine's sibling order; ``extras`` the carried slots,
    kinds, node_ids [R_all] and sample_probs [R_all, V] (or None), indexed like the engine."""
    slots_x, kinds_x, ids_x, probs_x = (extras.get(k) for k in ("slots", "kinds", "node_ids", "sample_probs"))
    rank = {c: k for kids in children for k, c in enumerate(kids)}
    if ids_x is not None:
        ids = [int(ids_x[j]) for j in nodes]
        if sorted(ids) != list(range(len(nodes))):
            raise ValueError(
                f"{where}.node_ids: the nodes' entries are {ids}, not a permutation of 0..{len(nodes) - 1}; "
                "give each node's index in its source tree, or None"
            )
    else:
        ids = list(range(len(nodes)))
    pid = dict(zip(nodes, ids))
    R = len(nodes)
    out_tokens, out_parents, out_kinds, out_slots = [0] * R, [0] * R, [0] * R, [0] * R
    for j, i in pid.items():
        out_tokens[i] = tokens[j]
        out_parents[i] = -1 if parent[j] == 0 else pid[parent[j]]
        out_slots[i] = rank[j] if slots_x is None else int(slots_x[j])
        out_kinds[i] = 0 if kinds_x is None else int(kinds_x[j])
    if slots_x is not None:
        for p, kids in enumerate(children):
            got = [int(slots_x[c]) for c in kids]
            if got != sorted(got):
                raise ValueError(
                    f"{where}.slots: the children {kids} of node {p} come in the order of slots {got}; the engine "
                    "visits siblings in this order, which must be slot order (docs/spec.md §4): reorder them"
                )
    tree: dict[str, Any] = {"tokens": out_tokens, "parents": out_parents, "kinds": out_kinds, "slots": out_slots}
    if probs_x is not None:
        probs = np.zeros((R, probs_x.shape[-1]))
        for j, i in pid.items():
            probs[i] = probs_x[j]
        tree["sample_probs"] = probs
    return _protocol_dict(_read_protocol(tree, where))


def _extras(obj: Any, where: str, shape: tuple[int, ...]) -> dict[str, Any]:
    """The carried fields of an engine tree, checked against ``shape`` (the engine's index shape)."""
    out: dict[str, Any] = {}
    for name in ("slots", "kinds", "node_ids"):
        value = _get(obj, name)
        if value is not None:
            a = _ints(value, f"{where}.{name}", len(shape), "or leave it None")
            if a.shape != shape:
                raise ValueError(f"{where}.{name}: expected shape {list(shape)}, got {list(a.shape)}; or leave it None")
            out[name] = a
    probs = _get(obj, "sample_probs")
    if probs is not None:
        out["sample_probs"] = _floats(probs, f"{where}.sample_probs", (*shape, -1), "or leave it None")
    return out


def _ancestor_mask(parent: list[int]) -> np.ndarray:
    """[n, n] bool: row i is True at the root (0), node i's ancestors and i (parent[0] = -1)."""
    n = len(parent)
    mask = np.eye(n, dtype=bool)
    mask[:, 0] = True
    for i in range(1, n):
        j = parent[i]
        while j > 0:
            mask[i, j] = True
            j = parent[j]
    return mask
