"""Draft trees in the formats engines verify, and converters between them.

Four formats of one draft tree (docs/engine-formats.md describes each from its public
source, with a worked example in all four):

- **protocol tree** (``rheo gate --impl``, the docstring of ``rheo.checks.harness``): a dict
  of numpy arrays, one entry per node: ``tokens [R]``, ``parents [R]`` (-1 = the root, else
  an index into these arrays), ``kinds [R]`` (0 lead, 1 sample, 2 fill), ``slots [R]`` (the
  slot in the parent's pool, docs/spec.md §2) and optionally ``sample_probs [R, V]`` (the
  residual law each sample was drawn from). Node order is free.
- **DraftTree** (``rheo.fastpath.tree``): the fastpath's batched tensors, [b, R], nodes in
  order-key order (docs/spec.md §3), a parent before its children.
- **EAGLE** (SafeAILab/EAGLE, ``topK_genrate`` and ``evaluate_posterior``): one request;
  ``draft_tokens [1, N+1]`` (index 0 the root token), ``tree_mask [1, 1, N+1, N+1]``,
  ``tree_position_ids [N+1]``, ``retrieve_indices [P, W]`` (one root-to-leaf path per row,
  -1 padded) and the ``candidates [P, W]`` gathered along them. ``EagleTree``.
- **SGLang** (``build_tree_kernel_efficient``, ``tree_speculative_sampling_target_only``):
  batched; ``draft_tokens [bs*n]`` (each request's block root first), ``positions [bs*n]``,
  ``tree_mask [bs*n*n]``, ``retrive_index``, ``retrive_next_token`` (first child) and
  ``retrive_next_sibling [bs, n]``. ``SGLangTree``.

Conventions every converter keeps (and checks on the way back):

- **Engine order.** An engine tree lists its nodes by depth, then by slot path: the root
  first (index 0), then breadth first, a node's children together and in slot order.
  A parent always comes before its children.
- **Sibling order is slot order** (docs/spec.md §4 step 4 visits deterministic children in
  slot order). EAGLE's verifier tries a node's children in the order of the rows of
  ``retrieve_indices`` it first meets them in; the rows are sorted lexicographically by
  their index paths (as ``topK_genrate`` sorts them when sampling), so siblings come in
  index order, which is slot order. SGLang's verifier walks ``retrive_next_sibling`` from
  ``retrive_next_token``: the links run in slot order.
- **The root token** (the last committed token, which both engines put at index 0 and
  which the protocol does not hold) is an argument of every converter to an engine format.
- **What an engine format does not hold** travels beside it, in fields that are not part
  of the engine's format: ``slots``, ``kinds``, ``node_ids`` (each engine node's index in
  the tree it came from) and ``sample_probs``, indexed like the engine's nodes (-1, or a
  zero row, at the root and on padding). On the way back they restore the tree exactly,
  node order included; without them slots are the sibling ranks in the engine's order,
  kinds are 0 (lead: the engines' trees are Top-K trees) and node order is the engine's.

Tensors are made on the CPU (``.to(device)`` them); malformed input raises ValueError
naming the field and the fix.

>>> tree = {"tokens": [7, 3, 5], "parents": [-1, -1, 0], "kinds": [0, 1, 0], "slots": [0, 1, 0]}
>>> eagle = protocol_to_eagle(tree, root_token=9)
>>> eagle.draft_tokens.tolist(), eagle.retrieve_indices.tolist(), eagle.candidates.tolist()
([[9, 7, 3, 5]], [[0, 1, 3], [0, 2, -1]], [[9, 7, 5], [9, 3, -1]])
>>> back = eagle_to_protocol(eagle)
>>> [back[k].tolist() for k in ("tokens", "parents", "kinds", "slots")]
[[7, 3, 5], [-1, -1, 0], [0, 1, 0], [0, 1, 0]]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rheo.fastpath.tree import DraftTree, _tree_tensors

KIND_NAMES = {0: "lead", 1: "sample", 2: "fill"}
SAMPLE = 1


# ---- the engine formats ----


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


# ---- reading input ----


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
    """Check a protocol tree (the fields of ``rheo.checks.harness``) and add depths and slot paths."""
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


# ---- EAGLE ----


def protocol_to_eagle(tree: Any, root_token: int) -> EagleTree:
    """A protocol tree in EAGLE's format (``EagleTree``), nodes in engine order; ``root_token``
    is the last committed token (EAGLE's index 0). See the module docstring for an example."""
    where = "protocol_to_eagle"
    t = _read_protocol(tree, f"{where}: tree")
    root = _token(root_token, f"{where}: root_token")
    order = t.engine_order()
    index = {node: j + 1 for j, node in enumerate(order)}  # protocol node -> EAGLE index
    parent = [-1] + [0 if t.parents[i] < 0 else index[t.parents[i]] for i in order]
    depth = [0] + [t.depth[i] for i in order]
    tokens = [root] + [t.tokens[i] for i in order]
    inner = set(parent[1:])
    rows = []
    for leaf in (j for j in range(len(parent)) if j not in inner):  # the root alone when N = 0
        path = [leaf]
        while path[-1] != 0:
            path.append(parent[path[-1]])
        rows.append(path[::-1] + [-1] * (max(depth) - depth[leaf]))
    # Lexicographic: two rows first differ where both hold an index (a leaf is on no other
    # row), so -1 is never compared and this is EAGLE's own sort, -1 after every index.
    rows.sort()
    retrieve = torch.tensor(rows, dtype=torch.int64)
    ext = torch.tensor(tokens + [-1], dtype=torch.int64)
    probs = None
    if t.sample_probs is not None:
        probs = torch.from_numpy(np.concatenate([np.zeros((1, t.sample_probs.shape[1])), t.sample_probs[order]]))
    return EagleTree(
        draft_tokens=torch.tensor([tokens], dtype=torch.int64),
        tree_mask=torch.from_numpy(_ancestor_mask(parent)).to(torch.float32)[None, None],
        tree_position_ids=torch.tensor(depth, dtype=torch.int64),
        retrieve_indices=retrieve,
        candidates=ext[retrieve],
        slots=torch.tensor([-1] + [t.slots[i] for i in order], dtype=torch.int64),
        kinds=torch.tensor([-1] + [t.kinds[i] for i in order], dtype=torch.int64),
        node_ids=torch.tensor([-1] + order, dtype=torch.int64),
        sample_probs=probs,
    )


@dataclass
class _Eagle:
    tokens: list[int]  # [N+1]
    parent: list[int]  # [N+1], -1 at the root
    children: list[list[int]]  # [N+1], in path order
    rows: list[list[int]]  # retrieve_indices without padding
    extras: dict[str, Any]


def _read_eagle(eagle: Any, where: str) -> _Eagle:
    """Check an EAGLE tree: the paths of retrieve_indices define each node's parent (a node
    follows one node on every path it is on); tree_mask, tree_position_ids and candidates
    must agree with them."""
    fix_tokens = "give EAGLE's draft_tokens [1, N+1], the root token first"
    value = _get(eagle, "draft_tokens")
    if value is None:
        raise ValueError(f"{where}: missing 'draft_tokens'; {fix_tokens}")
    a = _ints(value, f"{where}.draft_tokens", (1, 2), fix_tokens)
    if a.ndim == 2 and a.shape[0] != 1 or a.size == 0:
        raise ValueError(f"{where}.draft_tokens: expected shape [1, N+1], got {list(a.shape)}; {fix_tokens}")
    tokens = a.reshape(-1).tolist()
    n = len(tokens)
    for name in ("retrieve_indices", "tree_position_ids", "tree_mask"):
        if _get(eagle, name) is None:
            raise ValueError(
                f"{where}: missing {name!r}; an EAGLE tree has draft_tokens, tree_mask, tree_position_ids and "
                "retrieve_indices"
            )
    retrieve = _ints(
        _get(eagle, "retrieve_indices"), f"{where}.retrieve_indices", 2, "give [P, W] index paths, -1 padded"
    )
    if retrieve.shape[0] == 0:
        raise ValueError(f"{where}.retrieve_indices: no rows; give one root-to-leaf path per leaf")
    parent: list[int | None] = [None] * n
    parent[0] = -1
    children: list[list[int]] = [[] for _ in range(n)]
    rows: list[list[int]] = []
    for r, row in enumerate(retrieve.tolist()):
        if row[0] != 0:
            raise ValueError(
                f"{where}.retrieve_indices: row {r} starts at {row[0]}; every path starts at the root, index 0"
            )
        path = [0]
        for c in range(1, len(row)):
            x = row[c]
            if x == -1:
                continue
            if row[c - 1] == -1:
                raise ValueError(f"{where}.retrieve_indices: row {r} holds {x} after -1; pad only the tail with -1")
            if not 1 <= x < n:
                raise ValueError(f"{where}.retrieve_indices: row {r} holds {x}, not a node index 1..{n - 1}")
            if parent[x] is None:
                parent[x] = row[c - 1]
                children[row[c - 1]].append(x)
            elif parent[x] != row[c - 1]:
                raise ValueError(
                    f"{where}.retrieve_indices: node {x} follows node {parent[x]} on one path and node {row[c - 1]} "
                    f"on row {r}; a node has one parent"
                )
            path.append(x)
        rows.append(path)
    missing = [j for j in range(n) if parent[j] is None]
    if missing:
        raise ValueError(
            f"{where}.retrieve_indices: node {missing[0]} is on no path; list one root-to-leaf path per leaf"
        )
    ends: dict[int, int] = {}
    for r, path in enumerate(rows):
        if children[path[-1]]:
            raise ValueError(
                f"{where}.retrieve_indices: row {r} ends at node {path[-1]}, which has children; each row runs "
                "from the root to a leaf"
            )
        if path[-1] in ends:
            raise ValueError(
                f"{where}.retrieve_indices: rows {ends[path[-1]]} and {r} are the same path; one row per leaf"
            )
        ends[path[-1]] = r
    par = [int(p) if p is not None else -1 for p in parent]
    depth = [0] * n
    for path in rows:
        for d, j in enumerate(path):
            depth[j] = d
    pos = _ints(
        _get(eagle, "tree_position_ids"), f"{where}.tree_position_ids", 1, "give each node's depth, [N+1]"
    ).tolist()
    if len(pos) != n:
        raise ValueError(f"{where}.tree_position_ids: expected [N+1] = [{n}], got [{len(pos)}]; give each node's depth")
    for j in range(n):
        if pos[j] != depth[j]:
            raise ValueError(
                f"{where}.tree_position_ids: node {j} has {pos[j]}, but it is at depth {depth[j]} on its paths; "
                "give each node's depth (the root 0)"
            )
    mask_value = _get(eagle, "tree_mask")
    mask = (mask_value.detach().cpu().numpy() if isinstance(mask_value, torch.Tensor) else np.asarray(mask_value)) != 0
    if mask.shape not in ((1, 1, n, n), (n, n)):
        raise ValueError(f"{where}.tree_mask: expected shape [1, 1, {n}, {n}], got {list(mask.shape)}")
    want = _ancestor_mask(par)
    bad = np.flatnonzero((mask.reshape(n, n) != want).any(axis=1))
    if bad.size:
        raise ValueError(
            f"{where}.tree_mask: row {bad[0]} does not mark exactly the root, node {bad[0]}'s ancestors on its path "
            "and itself; make it agree with retrieve_indices"
        )
    cand = _get(eagle, "candidates")
    if cand is not None:
        got = _ints(cand, f"{where}.candidates", 2, "give draft_tokens gathered along retrieve_indices")
        ext = np.array(tokens + [-1])
        if got.shape != retrieve.shape or (got != ext[retrieve]).any():
            raise ValueError(
                f"{where}.candidates: not draft_tokens gathered along retrieve_indices (-1 on padding); "
                "rebuild them, or leave them None"
            )
    bad_tokens = [j for j in range(1, n) if tokens[j] < 0]
    if bad_tokens:
        raise ValueError(
            f"{where}.draft_tokens: node {bad_tokens[0]} holds {tokens[bad_tokens[0]]}; token ids are >= 0"
        )
    return _Eagle(tokens, par, children, rows, _extras(eagle, where, (n,)))


def eagle_to_protocol(eagle: EagleTree | Mapping) -> dict:
    """The protocol tree of an EAGLE tree. Slots, kinds and node order come from the carried
    fields when present, else: slots = sibling ranks in path order, kinds 0 (lead), nodes in
    EAGLE's index order."""
    where = "eagle_to_protocol"
    e = _read_eagle(eagle, where)
    return _from_engine(where, e.tokens, e.parent, e.children, list(range(1, len(e.tokens))), e.extras)


def gather_paths(eagle: EagleTree, values: torch.Tensor) -> torch.Tensor:
    """``values`` [N+1, ...] (by EAGLE index, e.g. the target logits of the tree forward)
    gathered along each path: [P, W, ...], as EAGLE's ``tree_decoding`` gathers logits.
    Padding positions hold NaN (-1 for integer values): EAGLE's own indexing reads the
    last row there, and no verifier may read them."""
    idx = eagle.retrieve_indices
    n = eagle.draft_tokens.shape[-1]
    if values.shape[0] != n:
        raise ValueError(f"gather_paths: values has {values.shape[0]} rows; give one per EAGLE index, [N+1] = [{n}]")
    out = values[idx.clamp(min=0)]
    pad = (idx < 0).reshape(idx.shape + (1,) * (values.dim() - 1))
    fill = float("nan") if out.is_floating_point() else -1
    return torch.where(pad, torch.full_like(out, fill), out)


def protocol_rows(engine_tree: EagleTree | SGLangTree) -> torch.Tensor:
    """The protocol's target-logits row of each engine entry (the protocol gives [R+1, V],
    row 0 the root and row i + 1 node i): EagleTree -> [N+1]; SGLangTree -> [bs, n] (-1 on
    padding). ``target_logits[protocol_rows(eagle)]`` puts them in EAGLE's index order."""
    if isinstance(engine_tree, EagleTree):
        e = _read_eagle(engine_tree, "protocol_rows")
        ids = e.extras.get("node_ids")
        n = len(e.tokens)
        rows = [0] + ([int(ids[j]) + 1 for j in range(1, n)] if ids is not None else list(range(1, n)))
        return torch.tensor(rows, dtype=torch.int64)
    reqs = _read_sglang(engine_tree, "protocol_rows")
    n = engine_tree.num_draft_tokens
    out = torch.full((len(reqs), n), -1, dtype=torch.int64)
    for b, s in enumerate(reqs):
        ids = s.extras.get("node_ids")
        out[b, 0] = 0
        for j in s.nodes:
            out[b, j] = (int(ids[j]) if ids is not None else j - 1) + 1
    return out


def eagle_result_to_protocol(eagle: EagleTree, best_candidate: int, accept_length: int, token: int) -> dict:
    """EAGLE's answer as the protocol's result: ``best_candidate`` (the row of
    retrieve_indices), ``accept_length`` (draft tokens accepted along it) and the token drawn
    after them (correction or bonus) -> {"tokens": accepted tokens then that token,
    "accepted": the accepted nodes' indices in the source tree (node_ids, else EAGLE index - 1)}."""
    where = "eagle_result_to_protocol"
    e = _read_eagle(eagle, where)
    best, length = int(best_candidate), int(accept_length)
    if not 0 <= best < len(e.rows):
        raise ValueError(f"{where}: best_candidate {best} is not a row of retrieve_indices (0..{len(e.rows) - 1})")
    path = e.rows[best]
    if not 0 <= length < len(path):
        raise ValueError(f"{where}: accept_length {length} is not 0..{len(path) - 1}, the draft tokens on row {best}")
    nodes = path[1 : length + 1]
    ids = e.extras.get("node_ids")
    accepted = [int(ids[j]) if ids is not None else j - 1 for j in nodes]
    return {"tokens": [e.tokens[j] for j in nodes] + [_token(token, f"{where}: token")], "accepted": accepted}


# ---- SGLang ----


def protocol_to_sglang(
    trees: Sequence[Any],
    root_tokens: int | Sequence[int],
    seq_lens: Sequence[int] | None = None,
    num_draft_tokens: int | None = None,
) -> SGLangTree:
    """A batch of protocol trees (one per request) in SGLang's format (``SGLangTree``).
    root_tokens: [bs] (or one int for all) the last committed tokens; seq_lens: [bs] the
    committed lengths (positions start there; default 0); num_draft_tokens: n, the entries
    per request (default: the largest tree's nodes + 1).

    >>> sg = protocol_to_sglang([{"tokens": [7, 3, 5], "parents": [-1, -1, 0], "kinds": [0, 1, 0],
    ...                           "slots": [0, 1, 0]}], root_tokens=9, seq_lens=[4])
    >>> sg.draft_tokens.tolist(), sg.positions.tolist()
    ([9, 7, 3, 5], [4, 5, 5, 6])
    >>> sg.retrive_next_token.tolist(), sg.retrive_next_sibling.tolist()
    ([[1, 3, -1, -1]], [[-1, 2, -1, -1]])
    """
    where = "protocol_to_sglang"
    if isinstance(trees, Mapping) or not isinstance(trees, Sequence) or not trees:
        raise ValueError(f"{where}: trees must be a non-empty list of protocol trees, one per request")
    ts = [_read_protocol(t, f"{where}: trees[{b}]") for b, t in enumerate(trees)]
    bs = len(ts)
    given = np.asarray(root_tokens.cpu() if isinstance(root_tokens, torch.Tensor) else root_tokens, dtype=object)
    if given.ndim == 0:
        roots = [_token(given.item(), f"{where}: root_tokens")] * bs
    else:
        roots = [_token(x, f"{where}: root_tokens[{b}]") for b, x in enumerate(given.reshape(-1).tolist())]
    lens = [0] * bs if seq_lens is None else [_token(x, f"{where}: seq_lens[{b}]") for b, x in enumerate(seq_lens)]
    if len(roots) != bs or len(lens) != bs:
        raise ValueError(
            f"{where}: root_tokens and seq_lens need one entry per tree ({bs}), got {len(roots)} and {len(lens)}"
        )
    need = max(len(t.tokens) for t in ts) + 1
    n = need if num_draft_tokens is None else int(num_draft_tokens)
    if n < need:
        raise ValueError(
            f"{where}: num_draft_tokens {n} is below the largest tree's nodes + 1 ({need}); give at least {need}"
        )
    tokens = np.zeros((bs, n), dtype=np.int64)
    positions = np.array(lens, dtype=np.int64)[:, None].repeat(n, axis=1)
    next_token = np.full((bs, n), -1, dtype=np.int64)
    next_sibling = np.full((bs, n), -1, dtype=np.int64)
    mask = np.zeros((bs, n, n), dtype=bool)
    slots, kinds, ids = (np.full((bs, n), -1, dtype=np.int64) for _ in range(3))
    has_probs = [t.sample_probs is not None for t in ts]
    if any(has_probs) and not all(has_probs):
        raise ValueError(
            f"{where}: trees[{has_probs.index(False)}] has no sample_probs while others do; give all or none"
        )
    probs = None
    if all(has_probs):
        widths = {t.sample_probs.shape[1] for t in ts if t.sample_probs is not None}
        if len(widths) != 1:
            raise ValueError(
                f"{where}: the trees' sample_probs have different vocabularies {sorted(widths)}; give one V"
            )
        probs = np.zeros((bs, n, widths.pop()))
    for b, t in enumerate(ts):
        order = t.engine_order()
        index = {node: j + 1 for j, node in enumerate(order)}
        parent = [-1] + [0 if t.parents[i] < 0 else index[t.parents[i]] for i in order]
        tokens[b, : len(parent)] = [roots[b]] + [t.tokens[i] for i in order]
        positions[b, 1 : len(parent)] += [t.depth[i] for i in order]
        last: dict[int, int] = {}
        for j in range(1, len(parent)):  # engine order: siblings in slot order
            p = parent[j]
            if p in last:
                next_sibling[b, last[p]] = j
            else:
                next_token[b, p] = j
            last[p] = j
        mask[b, : len(parent), : len(parent)] = _ancestor_mask(parent)
        for j in range(len(parent), n):  # padding rows: the root and themselves
            mask[b, j, 0] = mask[b, j, j] = True
        slots[b, 1 : len(parent)] = [t.slots[i] for i in order]
        kinds[b, 1 : len(parent)] = [t.kinds[i] for i in order]
        ids[b, 1 : len(parent)] = order
        if probs is not None and t.sample_probs is not None:
            probs[b, 1 : len(parent)] = t.sample_probs[order]
    return SGLangTree(
        draft_tokens=torch.from_numpy(tokens.reshape(-1)),
        positions=torch.from_numpy(positions.reshape(-1)),
        tree_mask=torch.from_numpy(mask.reshape(-1)),
        retrive_index=torch.arange(bs * n, dtype=torch.int64).reshape(bs, n),
        retrive_next_token=torch.from_numpy(next_token),
        retrive_next_sibling=torch.from_numpy(next_sibling),
        slots=torch.from_numpy(slots),
        kinds=torch.from_numpy(kinds),
        node_ids=torch.from_numpy(ids),
        sample_probs=None if probs is None else torch.from_numpy(probs),
    )


@dataclass
class _SGLangRequest:
    tokens: list[int]  # [n], the block
    parent: list[int]  # [n], -1 at the root and on padding
    children: list[list[int]]  # [n], in sibling-link order
    nodes: list[int]  # 1..R: the nodes, reached from the root
    extras: dict[str, Any]


def _read_sglang(sg: Any, where: str) -> list[_SGLangRequest]:
    """Check an SGLang batch: each request's nodes are what the links reach from its root
    (index 0), each once; they come first in the block, padding (reached by no link, no
    links of its own) after; positions and tree_mask must agree."""
    for name in ("draft_tokens", "positions", "retrive_index", "retrive_next_token", "retrive_next_sibling"):
        if _get(sg, name) is None:
            raise ValueError(
                f"{where}: missing {name!r}; an SGLang tree has draft_tokens, positions, retrive_index, "
                "retrive_next_token and retrive_next_sibling"
            )
    index = _ints(_get(sg, "retrive_index"), f"{where}.retrive_index", 2, "give [bs, n]")
    bs, n = index.shape
    if n == 0 or bs == 0:
        raise ValueError(f"{where}.retrive_index: shape {list(index.shape)}; give [bs, n] with n >= 1 (the root)")
    links = {}
    for name in ("retrive_next_token", "retrive_next_sibling"):
        links[name] = _ints(_get(sg, name), f"{where}.{name}", 2, "give [bs, n] indices into the block, -1 none")
        if links[name].shape != (bs, n):
            raise ValueError(
                f"{where}.{name}: expected shape [{bs}, {n}] like retrive_index, got {list(links[name].shape)}"
            )
    flat = {}
    for name in ("draft_tokens", "positions"):
        value = _get(sg, name)
        a = _ints(value, f"{where}.{name}", (1, 2), f"give [bs * n] = [{bs * n}]")
        if a.size != bs * n:
            raise ValueError(f"{where}.{name}: expected [bs * n] = [{bs * n}] entries, got shape {list(a.shape)}")
        flat[name] = a.reshape(bs, n)
    if (index != np.arange(bs * n).reshape(bs, n)).any():
        b, i = np.argwhere(index != np.arange(bs * n).reshape(bs, n))[0]
        raise ValueError(
            f"{where}.retrive_index: entry [{b}, {i}] is {index[b, i]}; SGLang's is b * n + i = {b * n + i}"
        )
    mask = None
    if _get(sg, "tree_mask") is not None:
        m = _get(sg, "tree_mask")
        m = (m.detach().cpu().numpy() if isinstance(m, torch.Tensor) else np.asarray(m)) != 0
        if m.size != bs * n * n:
            raise ValueError(
                f"{where}.tree_mask: expected [bs * n * n] = [{bs * n * n}] entries (the draft-token part, "
                f"QLEN_ONLY), got shape {list(m.shape)}; or leave it None"
            )
        mask = m.reshape(bs, n, n)
    extras = _extras(sg, where, (bs, n))
    out = []
    nxt, sib = links["retrive_next_token"], links["retrive_next_sibling"]
    for b in range(bs):
        parent = [-1] * n
        children: list[list[int]] = [[] for _ in range(n)]
        reached = {0}
        stack = [0]
        if sib[b, 0] != -1:
            raise ValueError(
                f"{where}.retrive_next_sibling: request {b}'s root has sibling {sib[b, 0]}; the root has none (-1)"
            )
        while stack:
            v = stack.pop()
            c = int(nxt[b, v])
            while c != -1:
                if not 1 <= c < n:
                    raise ValueError(f"{where}: request {b} links to {c}, not an index 1..{n - 1} of its block")
                if c in reached:
                    raise ValueError(
                        f"{where}: request {b}'s node {c} is reached twice by retrive_next_token / "
                        "retrive_next_sibling (a cycle or a shared child); each node is one parent's child"
                    )
                reached.add(c)
                parent[c] = v
                children[v].append(c)
                stack.append(c)
                c = int(sib[b, c])
        R = len(reached) - 1
        if reached != set(range(R + 1)):
            gap = min(set(range(R + 1)) - reached)
            raise ValueError(
                f"{where}: request {b}'s entry {gap} is reached by no link while a later one is; a request's "
                "nodes come first in its block, padding after"
            )
        for j in range(R + 1, n):
            if nxt[b, j] != -1 or sib[b, j] != -1:
                raise ValueError(
                    f"{where}: request {b}'s padding entry {j} has links; padding has retrive_next_token and "
                    "retrive_next_sibling -1"
                )
        depth = [0] * n
        for v in range(R + 1):  # BFS-free: a parent is reached before its child, so walk up
            d, j = 0, v
            while parent[j] != -1:
                d, j = d + 1, parent[j]
            depth[v] = d
        pos = flat["positions"][b]
        for v in range(1, R + 1):
            if pos[v] != pos[0] + depth[v]:
                raise ValueError(
                    f"{where}.positions: request {b}'s node {v} is at {pos[v]}, expected the root's {pos[0]} + its "
                    f"depth {depth[v]}"
                )
        if mask is not None:
            want = _ancestor_mask(parent[: R + 1])
            bad = np.flatnonzero(
                (mask[b, : R + 1, : R + 1] != want).any(axis=1) | mask[b, : R + 1, R + 1 :].any(axis=1)
            )
            if bad.size:
                raise ValueError(
                    f"{where}.tree_mask: request {b}'s row {bad[0]} does not mark exactly the root, the node's "
                    "ancestors and itself; make it agree with the links, or leave it None"
                )
        tokens = flat["draft_tokens"][b].tolist()
        bad_tokens = [j for j in range(1, R + 1) if tokens[j] < 0]
        if bad_tokens:
            raise ValueError(
                f"{where}.draft_tokens: request {b}'s node {bad_tokens[0]} holds {tokens[bad_tokens[0]]}; "
                "token ids are >= 0"
            )
        ex = {k: v[b] for k, v in extras.items()}
        out.append(_SGLangRequest(tokens, parent, children, list(range(1, R + 1)), ex))
    return out


def sglang_to_protocol(sg: SGLangTree | Mapping) -> list[dict]:
    """The protocol trees of an SGLang batch, one per request. Slots, kinds and node order
    come from the carried fields when present, else: slots = sibling ranks in link order,
    kinds 0 (lead), nodes in block order."""
    where = "sglang_to_protocol"
    return [
        _from_engine(f"{where}: request {b}", s.tokens, s.parent, s.children, s.nodes, s.extras)
        for b, s in enumerate(_read_sglang(sg, where))
    ]


def sglang_result_to_protocol(
    sg: SGLangTree, accept_index: torch.Tensor, accept_token_num: torch.Tensor, predicts: torch.Tensor
) -> list[dict]:
    """SGLang's answer (``tree_speculative_sampling_target_only``'s outputs) as the protocol's
    results, one per request. accept_index: [bs, S] rows of the flattened batch (retrive_index
    values), the root then the accepted nodes; accept_token_num: [bs] how many nodes were
    accepted; predicts: [bs * n] the token emitted after each accepted entry (after the last
    one: the correction or bonus token)."""
    where = "sglang_result_to_protocol"
    reqs = _read_sglang(sg, where)
    n = sg.num_draft_tokens
    acc = _ints(accept_index, f"{where}: accept_index", 2, "give [bs, S]")
    num = _ints(accept_token_num, f"{where}: accept_token_num", 1, "give [bs]")
    pred = _ints(predicts, f"{where}: predicts", 1, "give [bs * n]")
    if acc.shape[0] != len(reqs) or num.shape != (len(reqs),) or pred.shape != (len(reqs) * n,):
        raise ValueError(
            f"{where}: expected accept_index [bs, S], accept_token_num [bs] and predicts [bs * n] with bs = "
            f"{len(reqs)}, n = {n}; got {list(acc.shape)}, {list(num.shape)}, {list(pred.shape)}"
        )
    out = []
    for b, s in enumerate(reqs):
        k = int(num[b])
        if not 0 <= k < acc.shape[1]:
            raise ValueError(f"{where}: accept_token_num[{b}] is {k}, not 0..{acc.shape[1] - 1}")
        local = [int(x) - b * n for x in acc[b, : k + 1]]
        if local[0] != 0:
            raise ValueError(f"{where}: accept_index[{b}, 0] is {acc[b, 0]}, not the root's row {b * n}")
        for prev, j in zip(local, local[1:]):
            if not 1 <= j < n or s.parent[j] != prev:
                raise ValueError(
                    f"{where}: accept_index[{b}] = {acc[b, : k + 1].tolist()} is not a path down from the root"
                )
        ids = s.extras.get("node_ids")
        accepted = [int(ids[j]) if ids is not None else j - 1 for j in local[1:]]
        last = _token(int(pred[b * n + local[-1]]), f"{where}: predicts[{b * n + local[-1]}]")
        out.append({"tokens": [s.tokens[j] for j in local[1:]] + [last], "accepted": accepted})
    return out


# ---- the fastpath's DraftTree ----


def draft_tree_to_protocol(tree: DraftTree, i: int, vocab_size: int | None = None) -> dict:
    """Request i of a DraftTree as a protocol tree, in the DraftTree's node order. With
    ``vocab_size`` the samples' sparse residual laws become ``sample_probs [R, V]``."""
    where = "draft_tree_to_protocol"
    b = tree.tokens.shape[0]
    if isinstance(i, bool) or not isinstance(i, int | np.integer) or not 0 <= i < b:
        raise ValueError(f"{where}: i = {i!r} is not a request of the batch (0..{b - 1})")
    n = int(tree.num_nodes[i])
    out: dict[str, np.ndarray] = {
        name: getattr(tree, name)[i, :n].detach().cpu().numpy().astype(np.int64)
        for name in ("tokens", "parents", "kinds", "slots")
    }
    if vocab_size is not None:
        V = _token(vocab_size, f"{where}: vocab_size")
        ids = tree.sample_ids[i, :n].detach().cpu().numpy()
        probs = tree.sample_probs[i, :n].detach().cpu().to(torch.float64).numpy()
        if ids.size and ids.max() >= V:
            raise ValueError(
                f"{where}: vocab_size {V} is below a sample's token id {ids.max()}; give the vocabulary size"
            )
        dense = np.zeros((n, V))
        for j in np.flatnonzero(out["kinds"] == SAMPLE):
            np.add.at(dense[j], ids[j], probs[j])
        out["sample_probs"] = dense
    return out


def protocol_to_draft_tree(
    trees: Sequence[Any], K: int | None = None, depth: int | None = None, budget: int | None = None
) -> DraftTree:
    """A batch of protocol trees as a DraftTree (docs/spec.md §3's tree format, see
    ``rheo.fastpath.tree.DraftTree``). K, depth and budget (R) default to what the trees
    need. A tree whose parents all come before their children keeps its node order (the
    fastpath's and the reference's order-key order do), any other is put in engine order.
    What no protocol tree holds comes back as zeros: ranks, scores and expansions. The
    samples' residual laws come from ``sample_probs`` (in sparse form: ids by probability,
    high to low, then by id; W = max(K, the largest support)); a sample without them is an
    error, since the fastpath's verifier needs them (docs/spec.md §4 step 3)."""
    where = "protocol_to_draft_tree"
    if isinstance(trees, Mapping) or not isinstance(trees, Sequence) or not trees:
        raise ValueError(f"{where}: trees must be a non-empty list of protocol trees, one per request")
    ts = [_read_protocol(t, f"{where}: trees[{b}]") for b, t in enumerate(trees)]
    need_K = max((s + 1 for t in ts for s in t.slots), default=1)
    need_D = max((d for t in ts for d in t.depth), default=1)
    need_R = max(len(t.tokens) for t in ts)
    K_, D, R = (
        (need_K if K is None else int(K)),
        (need_D if depth is None else int(depth)),
        (need_R if budget is None else int(budget)),
    )
    for name, got, need, what in (
        ("K", K_, need_K, "the largest slot + 1"),
        ("depth", D, need_D, "the deepest node's depth"),
        ("budget", R, need_R, "the largest tree's nodes"),
    ):
        if got < max(need, 1):
            raise ValueError(
                f"{where}: {name} = {got} is too small: the trees need {what}, {max(need, 1)}; give at least that, "
                "or None"
            )
    b = len(ts)
    tokens, slots, depths = (torch.zeros((b, R), dtype=torch.int64) for _ in range(3))
    parents = torch.full((b, R), -1, dtype=torch.int64)
    kinds = torch.full((b, R), -1, dtype=torch.int8)
    valid = torch.zeros((b, R), dtype=torch.bool)
    prefixes = torch.full((b, R + 1, D), -1, dtype=torch.int64)
    laws: list[tuple[int, int, np.ndarray]] = []  # (request, row, dense law) of each sample
    for k, t in enumerate(ts):
        n = len(t.tokens)
        order = list(range(n)) if all(p < i for i, p in enumerate(t.parents)) else t.engine_order()
        row = {node: j for j, node in enumerate(order)}
        paths: list[list[int]] = [[] for _ in range(n)]
        for j, i in enumerate(order):
            p = t.parents[i]
            tokens[k, j], slots[k, j], depths[k, j], kinds[k, j] = t.tokens[i], t.slots[i], t.depth[i], t.kinds[i]
            parents[k, j] = -1 if p < 0 else row[p]
            paths[j] = (paths[row[p]] if p >= 0 else []) + [t.tokens[i]]
            prefixes[k, j + 1, : len(paths[j])] = torch.tensor(paths[j])
            if t.kinds[i] == SAMPLE:
                if t.sample_probs is None:
                    raise ValueError(
                        f"{where}: trees[{k}] node {i} is a sample (kind 1) without sample_probs; give the residual "
                        "law it was drawn from (the fastpath's verifier needs it, docs/spec.md §4 step 3)"
                    )
                laws.append((k, j, t.sample_probs[i]))
        valid[k, :n] = True
    W = max([K_] + [int((law > 0).sum()) for _, _, law in laws])
    sample_ids = torch.zeros((b, R, W), dtype=torch.int64)
    sample_probs = torch.zeros((b, R, W), dtype=torch.float64)
    for k, j, law in laws:
        support = sorted(np.flatnonzero(law > 0).tolist(), key=lambda x: (-law[x], x))
        sample_ids[k, j, : len(support)] = torch.tensor(support, dtype=torch.int64)
        sample_probs[k, j, : len(support)] = torch.from_numpy(law[support])
    mask, position_ids, children, retrieve = _tree_tensors(parents, depths, slots, valid, K_, D)
    return DraftTree(
        tokens=tokens,
        parents=parents,
        depth=depths,
        slots=slots,
        kinds=kinds,
        ranks=torch.zeros((b, R), dtype=torch.int64),
        scores=torch.zeros((b, R), dtype=torch.float64),
        valid=valid,
        num_nodes=valid.sum(1),
        attention_mask=mask,
        position_ids=position_ids,
        children=children,
        prefixes=prefixes,
        retrieve_indices=retrieve,
        sample_ids=sample_ids,
        sample_probs=sample_probs,
        verify_probs=sample_probs,
        verify_dense=None,
        expansions=torch.zeros(b, dtype=torch.int64),
    )


def draft_tree_to_eagle(tree: DraftTree, i: int, root_token: int, vocab_size: int | None = None) -> EagleTree:
    """Request i of a DraftTree in EAGLE's format (EAGLE verifies one request at a time);
    node_ids are the DraftTree's node indices. ``vocab_size`` carries the samples' laws."""
    return protocol_to_eagle(draft_tree_to_protocol(tree, i, vocab_size), root_token)


def eagle_to_draft_tree(
    eagle_trees: Sequence[EagleTree], K: int | None = None, depth: int | None = None, budget: int | None = None
) -> DraftTree:
    """EAGLE trees (one per request) as one DraftTree (``protocol_to_draft_tree``)."""
    if not isinstance(eagle_trees, Sequence) or isinstance(eagle_trees, EagleTree):
        raise ValueError("eagle_to_draft_tree: give a list of EagleTree, one per request")
    return protocol_to_draft_tree([eagle_to_protocol(e) for e in eagle_trees], K, depth, budget)


def draft_tree_to_sglang(
    tree: DraftTree,
    root_tokens: int | Sequence[int],
    seq_lens: Sequence[int] | None = None,
    vocab_size: int | None = None,
    num_draft_tokens: int | None = None,
) -> SGLangTree:
    """A DraftTree batch in SGLang's format (``protocol_to_sglang``); node_ids are the
    DraftTree's node indices. ``vocab_size`` carries the samples' laws."""
    trees = [draft_tree_to_protocol(tree, i, vocab_size) for i in range(tree.tokens.shape[0])]
    return protocol_to_sglang(trees, root_tokens, seq_lens, num_draft_tokens)


def sglang_to_draft_tree(
    sg: SGLangTree, K: int | None = None, depth: int | None = None, budget: int | None = None
) -> DraftTree:
    """An SGLang batch as one DraftTree (``protocol_to_draft_tree``)."""
    return protocol_to_draft_tree(sglang_to_protocol(sg), K, depth, budget)
