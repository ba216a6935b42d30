"""The value ranges of the fastpath's outputs, checked in tests (never at run time).

``rheo.fastpath`` checks its tensors' dtypes and shapes at every entry point and handoff
(``rheo.fastpath.inputs``): those are host metadata. Whether the *values* are in range
(probabilities in [0, 1], laws summing to 1, indices in range, parents before children,
...) can only be read from the values, which on a GPU is a device sync that would stall the
serving loop, so the fastpath never checks them itself: tests do, with these functions, on
the tensors a cycle returned. Each returns a list of violations (empty: all in range), each
naming the tensor, the request and what is wrong; ``assert_in_range`` raises them.

>>> import torch
>>> from rheo.fastpath import FastConfig, run_cycle
>>> from rheo.testing import HashTableModel
>>> cfg = FastConfig(K=3, depth=3, budget=6, m=1)
>>> tree, result = run_cycle(HashTableModel(40, 2, seed=0), cfg, 1.0, generator=torch.Generator().manual_seed(0))
>>> tree_violations(tree, cfg, 40) + result_violations(result, tree, cfg, 40)
[]
"""

from __future__ import annotations

import torch

from rheo.fastpath import DraftTree, Params, VerifyResult


def _tol(p: torch.Tensor) -> float:
    """How far from 1 a law of ``p``'s dtype may sum after rounding (W entries)."""
    return max(1e-12, 4 * torch.finfo(p.dtype).eps * max(p.shape[-1], 1))


def law_violations(p: torch.Tensor, name: str = "law", rows: torch.Tensor | None = None) -> list[str]:
    """Probabilities ``p`` [..., V]: every entry in [0, 1] and finite, every row (where
    ``rows`` [...] is True; default every row) summing to 1 up to rounding."""
    tol = _tol(p)  # in p's own dtype
    p = p.detach().cpu().to(torch.float64)
    out = []
    if not bool(torch.isfinite(p).all()):
        out.append(f"{name}: entries that are not finite")
    elif bool((p < 0).any()) or bool((p > 1 + tol).any()):
        out.append(f"{name}: entries outside [0, 1]: min {p.min().item()!r}, max {p.max().item()!r}")
    sums = p.sum(-1)
    check = torch.ones_like(sums, dtype=torch.bool) if rows is None else rows.detach().cpu()
    bad = check & ((sums - 1).abs() > tol)
    if bool(bad.any()):
        where = [tuple(ix) for ix in bad.nonzero().tolist()[:3]]
        out.append(f"{name}: rows {where} do not sum to 1: {[sums[ix].item() for ix in where]}")
    return out


def tree_violations(tree: DraftTree, params: Params, vocab_size: int | None = None) -> list[str]:
    """The value ranges of ``DraftTree``'s docstring, request by request: num_nodes in
    [0, R], the first num_nodes rows valid and the rest padding (token 0, parent -1, kind -1,
    score 0); on the nodes, tokens in [0, V), parents before children (-1 <= parent < the
    node), depth = the parent's + 1 (1 under the root) and at most D, slots in [0, K), kinds
    lead/sample/fill, path scores in [0, 1] and non-increasing in node order (order-key
    order) and along every path; the tree tensors as the parents say (the mask sees the root,
    itself and its parent's row, nothing later; position ids = depths; each node its parent's
    child at its slot); retrieve_indices in [-1, R] starting at the root; sample_ids in
    [0, V); sample_probs and verify_probs laws on the samples and 0 elsewhere; expansions in
    [1, 1 + B(D-1)]."""
    t = {f: getattr(tree, f) for f in DraftTree.__dataclass_fields__}
    t = {f: (x.detach().cpu() if isinstance(x, torch.Tensor) else x) for f, x in t.items()}
    b, R = t["tokens"].shape
    K, D = params.K, params.depth
    out: list[str] = []

    def bad(cond: bool, msg: str) -> None:
        if not cond:
            out.append(msg)

    for i in range(b):
        n = int(t["num_nodes"][i])
        bad(0 <= n <= R, f"num_nodes[{i}] = {n} is not in [0, R = {R}]")
        if not 0 <= n <= R:
            continue
        valid = t["valid"][i]
        bad(bool(valid[:n].all()) and not bool(valid[n:].any()), f"valid[{i}] is not num_nodes = {n} Trues then Falses")
        tok, par, dep = t["tokens"][i], t["parents"][i], t["depth"][i]
        slot, kind, score = t["slots"][i], t["kinds"][i].to(torch.int64), t["scores"][i]
        pad = slice(n, R)
        bad(
            bool((tok[pad] == 0).all() and (par[pad] == -1).all() and (kind[pad] == -1).all()),
            f"request {i}: padding rows are not token 0, parent -1, kind -1",
        )
        bad(bool((score[pad] == 0).all()), f"request {i}: padding rows' scores are not 0")
        if vocab_size is not None:
            bad(bool(((tok[:n] >= 0) & (tok[:n] < vocab_size)).all()), f"tokens[{i}] outside [0, V = {vocab_size})")
        idx = torch.arange(n)
        bad(bool(((par[:n] >= -1) & (par[:n] < idx)).all()), f"parents[{i}]: a parent not before its child")
        want_depth = torch.where(par[:n] >= 0, dep[par[:n].clamp(min=0)] + 1, torch.ones_like(dep[:n]))
        bad(bool((dep[:n] == want_depth).all() and (dep[:n] <= D).all()), f"depth[{i}] is not the parent's + 1 (<= D)")
        bad(bool(((slot[:n] >= 0) & (slot[:n] < K)).all()), f"slots[{i}] outside [0, K = {K})")
        bad(bool(((kind[:n] >= 0) & (kind[:n] <= 2)).all()), f"kinds[{i}] outside lead/sample/fill (0, 1, 2)")
        s = score[:n]
        bad(bool(((s >= 0) & (s <= 1)).all()), f"scores[{i}] outside [0, 1]")
        bad(bool((s[1:] <= s[:-1]).all()), f"scores[{i}] not non-increasing in node order (the order key)")
        parent_score = torch.where(par[:n] >= 0, s[par[:n].clamp(min=0)], torch.ones_like(s))
        bad(bool((s <= parent_score).all()), f"scores[{i}]: a child scores above its parent")
        mask = t["attention_mask"][i]
        bad(bool(mask.diagonal().all()), f"attention_mask[{i}]: a row does not see itself")
        bad(not bool(mask.triu(1).any()), f"attention_mask[{i}]: a row sees a later row")
        rows1 = idx + 1
        bad(bool(mask[rows1, 0].all()), f"attention_mask[{i}]: a node does not see the root")
        bad(bool(mask[rows1, par[:n] + 1].all()), f"attention_mask[{i}]: a node does not see its parent")
        pos = t["position_ids"][i]
        bad(int(pos[0]) == 0 and bool((pos[1 : n + 1] == dep[:n]).all()), f"position_ids[{i}] are not the depths")
        ch = t["children"][i]
        bad(bool(((ch >= -1) & (ch <= R)).all()), f"children[{i}] outside [-1, R]")
        bad(bool((ch[par[:n] + 1, slot[:n]] == rows1).all()), f"children[{i}]: a node is not its parent's child")
        bad(int((ch >= 0).sum()) == n, f"children[{i}] holds other than the {n} nodes")
        ri = t["retrieve_indices"][i]
        bad(bool(((ri >= -1) & (ri <= R)).all()), f"retrieve_indices[{i}] outside [-1, R]")
        used = ri[:, 0] >= 0
        bad(bool((ri[used, 0] == 0).all()), f"retrieve_indices[{i}]: a path not starting at the root")
        pre = t["prefixes"][i]
        bad(bool((pre >= -1).all()), f"prefixes[{i}] below -1")
        if vocab_size is not None:
            bad(bool((pre < vocab_size).all()), f"prefixes[{i}] at or above V = {vocab_size}")
        sample = (kind == 1) & valid
        ids = t["sample_ids"][i]
        if vocab_size is not None:
            bad(bool(((ids >= 0) & (ids < vocab_size)).all()), f"sample_ids[{i}] outside [0, V = {vocab_size})")
        for name in ("sample_probs", "verify_probs"):
            p = t[name][i]
            out += law_violations(p, f"{name}[{i}]", rows=sample)
            bad(not bool(p[~sample].to(torch.float64).abs().sum() > 0), f"{name}[{i}]: mass away from the samples")
        e = int(t["expansions"][i])
        bad(1 <= e <= params.expansions, f"expansions[{i}] = {e} not in [1, {params.expansions}]")
    return out


def result_violations(
    result: VerifyResult, tree: DraftTree, params: Params, vocab_size: int | None = None
) -> list[str]:
    """The value ranges of ``VerifyResult``'s docstring: lengths in [1, D+1]; the first
    ``lengths`` tokens in [0, V) and -1 after; the first lengths - 1 accepted entries draft
    nodes (< num_nodes) on one root-to-leaf path of ``tree``, each emitting its node's token,
    and -1 after."""
    tokens, lengths, accepted = (x.detach().cpu() for x in (result.tokens, result.lengths, result.accepted))
    parents, tree_tokens, num = (x.detach().cpu() for x in (tree.parents, tree.tokens, tree.num_nodes))
    D = params.depth
    out: list[str] = []
    for i in range(tokens.shape[0]):
        L = int(lengths[i])
        if not 1 <= L <= D + 1:
            out.append(f"lengths[{i}] = {L} not in [1, D+1 = {D + 1}]")
            continue
        tok, acc = tokens[i], accepted[i]
        if not bool((tok[:L] >= 0).all()) or (vocab_size is not None and not bool((tok[:L] < vocab_size).all())):
            out.append(f"tokens[{i}]: an emitted token outside [0, V)")
        if not bool((tok[L:] == -1).all()) or not bool((acc[L - 1 :] == -1).all()):
            out.append(f"request {i}: tokens or accepted not -1 padded after the output")
        path = acc[: L - 1].tolist()
        if not all(0 <= j < int(num[i]) for j in path):
            out.append(f"accepted[{i}] = {path}: not nodes of the tree ({int(num[i])} nodes)")
            continue
        if [int(parents[i, j]) for j in path] != ([-1] + path)[: len(path)]:
            out.append(f"accepted[{i}] = {path}: not a path from the root")
        if [int(tree_tokens[i, j]) for j in path] != tok[: L - 1].tolist():
            out.append(f"request {i}: the output's tokens are not the accepted nodes' tokens")
    return out


def assert_in_range(
    tree: DraftTree, result: VerifyResult | None, params: Params, vocab_size: int | None = None
) -> None:
    """``tree_violations`` and ``result_violations`` as an AssertionError (in tests)."""
    bad = tree_violations(tree, params, vocab_size)
    if result is not None:
        bad += result_violations(result, tree, params, vocab_size)
    if bad:
        raise AssertionError("fastpath output out of range:\n  " + "\n  ".join(bad[:10]))
