"""The fastpath's ``DraftTree`` (batched tensors, nodes in order-key order) to and from the
protocol tree, and through it to and from the engine formats.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from rheo.fastpath.tree import DraftTree, _tree_tensors
from rheo.integrations.tree_formats.common import SAMPLE, EagleTree, SGLangTree, _read_protocol, _token
from rheo.integrations.tree_formats.eagle import eagle_to_protocol, protocol_to_eagle
from rheo.integrations.tree_formats.sglang import protocol_to_sglang, sglang_to_protocol


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
