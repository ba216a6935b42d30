"""Planted engine bugs in transformers' own speculative generation, each a context manager
that patches transformers' code (or subclasses the target's class) for as long as it is
active, never a fork. ``BUGS`` names them; docs/engines.md says which check catches each.

- ``kv_not_rolled_back``: ``Cache.crop`` does nothing, so the keys and values of rejected
  drafts stay in the cache after a rejection (target and assistant);
- ``positions_off_by_one``: the target's verification forward (more than one new token on a
  non-empty cache) places its tokens one position too far;
- ``bonus_from_last_draft_row``: when every draft is accepted, the bonus token is sampled
  from the last draft's row (the law before it) instead of the row after it;
- ``recurrent_state_not_restored``: a recurrent layer's state (LFM2's convolution state)
  keeps the rejected drafts' inputs instead of rolling back to the accepted prefix.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
import transformers.cache_utils
import transformers.generation.utils as generation

from rheo.integrations.engines.hf import TransformersEngine


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    saved = owner.__dict__[name]
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


@contextlib.contextmanager
def kv_not_rolled_back(engine: TransformersEngine) -> Iterator[None]:
    def crop(self: Any, tokens_to_remove: int) -> None:
        return None

    with _patched(transformers.cache_utils.Cache, "crop", crop):
        yield


def _shifted(cls: type) -> type:
    def forward(self: Any, input_ids: Any = None, cache: Any = None, position_ids: Any = None, **kwargs: Any) -> Any:
        past = int(cache.get_seq_length()) if cache is not None else 0
        if input_ids is not None and input_ids.shape[1] > 1 and past > 0:
            position_ids = (torch.arange(past, past + input_ids.shape[1]) + 1)[None]
        return cls.forward(self, input_ids=input_ids, cache=cache, position_ids=position_ids, **kwargs)  # type: ignore[attr-defined]

    return type(f"Shifted{cls.__name__}", (cls,), {"forward": forward})


@contextlib.contextmanager
def positions_off_by_one(engine: TransformersEngine) -> Iterator[None]:
    saved = engine.target_patch
    engine.target_patch = _shifted
    try:
        yield
    finally:
        engine.target_patch = saved


@contextlib.contextmanager
def bonus_from_last_draft_row(engine: TransformersEngine) -> Iterator[None]:
    original = generation._speculative_sampling

    def sampling(
        candidate_input_ids: Any, candidate_logits: Any, candidate_length: int, new_logits: Any, **kw: Any
    ) -> Any:
        if candidate_length > 0:
            new_logits = new_logits.clone()
            new_logits[:, candidate_length] = new_logits[:, candidate_length - 1]
        return original(candidate_input_ids, candidate_logits, candidate_length, new_logits, **kw)

    with _patched(generation, "_speculative_sampling", sampling):
        yield


@contextlib.contextmanager
def recurrent_state_not_restored(engine: TransformersEngine) -> Iterator[None]:
    def crop(self: Any, tokens_to_remove: int) -> None:
        for i in range(self.number_of_states):  # keep the newest states, rejected drafts' included
            self.conv_states[i] = self.conv_states[i][..., -self.conv_kernel_size[i] :]

    with _patched(transformers.cache_utils.LinearAttentionCacheLayerMixin, "crop", crop):
        yield


BUGS: dict[str, Callable[[TransformersEngine], contextlib.AbstractContextManager[None]]] = {
    "kv_not_rolled_back": kv_not_rolled_back,
    "positions_off_by_one": positions_off_by_one,
    "bonus_from_last_draft_row": bonus_from_last_draft_row,
    "recurrent_state_not_restored": recurrent_state_not_restored,
}
