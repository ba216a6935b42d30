"""Planted engine bugs in vLLM's own speculative decoding: ``PATCHES`` (applied in the vLLM
worker process around a request batch) patch vLLM's ``RejectionSampler.forward``, never a
fork. A test plants one with ``vllm_engine.BUGS[name](engine)``, which makes the engine's
worker apply it; this module imports vLLM (and Triton) and is imported by the worker only.

- ``neighbour_row``: each request's bonus token is sampled from the next request's bonus
  row (its batch neighbour's logits), the last request from the first's;
- ``bonus_from_last_draft_row``: a request with drafts samples its bonus token from its last
  draft's row (the law before that draft) instead of the row after it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch
from vllm.v1.sample.rejection_sampler import RejectionSampler


@contextlib.contextmanager
def _forward_with(change: Callable[[Any], Any]) -> Iterator[None]:
    original = RejectionSampler.forward

    def forward(self: Any, metadata: Any, *args: Any, **kwargs: Any) -> Any:
        return original(self, change(metadata), *args, **kwargs)

    RejectionSampler.forward = forward
    try:
        yield
    finally:
        RejectionSampler.forward = original


def _neighbour(metadata: Any) -> Any:
    bonus = metadata.bonus_logits_indices
    return dataclasses.replace(metadata, bonus_logits_indices=torch.roll(bonus, -1)) if bonus.numel() > 1 else metadata


def _last_draft_row(metadata: Any) -> Any:
    drafts = torch.as_tensor(metadata.num_draft_tokens, device=metadata.bonus_logits_indices.device)
    shifted = metadata.bonus_logits_indices - (drafts > 0).to(metadata.bonus_logits_indices.dtype)
    return dataclasses.replace(metadata, bonus_logits_indices=shifted)


PATCHES: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
    "neighbour_row": lambda: _forward_with(_neighbour),
    "bonus_from_last_draft_row": lambda: _forward_with(_last_draft_row),
}
