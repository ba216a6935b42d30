"""The model interface the fastpath drives (docs/spec.md §3-§4).

A model answers two questions per cycle and hears the outcome:

- ``draft_logits(query)`` -> [b, n, V]: the draft law at the nodes being expanded
  (``query`` says which: their tokens, token paths, and parent rows in the previous query,
  which is what a stateful EAGLE-style head needs to pick the hidden states it drafts from);
- ``target_logits(tree)`` -> [b, R+1, V]: the target at the root (index 0) and at every
  draft node (one forward over the tree with ``tree.attention_mask`` and
  ``tree.position_ids`` for a model with a KV cache), or a callable
  ``(rows [n], nodes [n]) -> [n, V]`` answering only the nodes the verifier visits;
- ``advance(tree, result)``: the cycle's output O is committed (a KV cache keeps the
  accepted path, a table model folds the tokens into its context).

Table models for tests and benchmarks live in ``rheo.testing``; a real model is
``rheo.integrations.spec_lm.SpecLM``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from .tree import DraftQuery, DraftTree
from .verify import VerifyResult


class SpecModel(Protocol):
    vocab_size: int
    batch: int  # requests
    device: torch.device

    def draft_logits(self, query: DraftQuery) -> torch.Tensor: ...  # -> [b, n, V]

    def target_logits(  # -> [b, R+1, V], or (rows [n], nodes [n]) -> [n, V]
        self, tree: DraftTree
    ) -> torch.Tensor | Callable[[torch.Tensor, torch.Tensor], torch.Tensor]: ...

    def advance(self, tree: DraftTree, result: VerifyResult) -> None: ...
