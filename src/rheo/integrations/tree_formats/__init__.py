"""Draft trees in the formats engines verify, and converters between them.

Four formats of one draft tree (docs/engine-formats.md describes each from its public
source, with a worked example in all four):

- **protocol tree** (``rheo gate --impl``, the docstring of ``rheo.checks.protocol``): a dict
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

from rheo.integrations.tree_formats.common import KIND_NAMES, SAMPLE, EagleTree, SGLangTree
from rheo.integrations.tree_formats.draft_tree import (
    draft_tree_to_eagle,
    draft_tree_to_protocol,
    draft_tree_to_sglang,
    eagle_to_draft_tree,
    protocol_to_draft_tree,
    sglang_to_draft_tree,
)
from rheo.integrations.tree_formats.eagle import (
    eagle_result_to_protocol,
    eagle_to_protocol,
    gather_paths,
    protocol_rows,
    protocol_to_eagle,
)
from rheo.integrations.tree_formats.sglang import protocol_to_sglang, sglang_result_to_protocol, sglang_to_protocol

__all__ = [
    "EagleTree",
    "KIND_NAMES",
    "SAMPLE",
    "SGLangTree",
    "draft_tree_to_eagle",
    "draft_tree_to_protocol",
    "draft_tree_to_sglang",
    "eagle_result_to_protocol",
    "eagle_to_draft_tree",
    "eagle_to_protocol",
    "gather_paths",
    "protocol_rows",
    "protocol_to_draft_tree",
    "protocol_to_eagle",
    "protocol_to_sglang",
    "sglang_result_to_protocol",
    "sglang_to_draft_tree",
    "sglang_to_protocol",
]
