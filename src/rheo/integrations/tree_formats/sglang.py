"""SGLang's format (``build_tree_kernel_efficient``,
``tree_speculative_sampling_target_only``): batched; ``draft_tokens [bs*n]``,
``positions``, ``tree_mask``, ``retrive_index``, ``retrive_next_token`` and
``retrive_next_sibling [bs, n]``; converters both ways and a verifier's answer read back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rheo.integrations.tree_formats.common import (
    SGLangTree,
    _ancestor_mask,
    _extras,
    _from_engine,
    _get,
    _ints,
    _read_protocol,
    _token,
)


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
