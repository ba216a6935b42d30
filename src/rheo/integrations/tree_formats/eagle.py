"""EAGLE's format (SafeAILab/EAGLE, ``topK_genrate`` and ``evaluate_posterior``): one
request; ``draft_tokens [1, N+1]``, ``tree_mask``, ``tree_position_ids``,
``retrieve_indices [P, W]`` and the ``candidates`` gathered along them; converters both
ways, the paths gathered, and a verifier's answer read back into the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rheo.integrations.tree_formats.common import (
    EagleTree,
    SGLangTree,
    _ancestor_mask,
    _extras,
    _from_engine,
    _get,
    _ints,
    _read_protocol,
    _token,
)
from rheo.integrations.tree_formats.sglang import _read_sglang


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
