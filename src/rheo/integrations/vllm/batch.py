"""A vLLM batch as the model runner builds it: requests (vLLM's ``SamplingParams`` plus the
generator the model runner makes for a seeded one), ``SamplingMetadata`` filled as
``InputBatch._make_sampling_metadata`` fills it (tests/test_vllm.py compares the two),
``SpecDecodeMetadata`` as ``GPUModelRunner._calc_spec_decode_metadata`` lays it out, and
vLLM's non-speculative sampler law."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rheo.integrations.vllm.loader import load_vllm

DEVICE = torch.device("cpu")


def _vllm() -> Any:
    return load_vllm()


@dataclass
class Request:
    """One request of a batch: its vLLM ``SamplingParams`` and the generator of a seeded one
    (``torch.Generator().manual_seed(seed)``, as ``GPUModelRunner`` makes it), else None."""

    params: Any
    generator: torch.Generator | None = None


def sampling_params(config: dict, temperature: float, seed: int | None = None) -> Any:
    """vLLM's ``SamplingParams`` for a config: T = 0 is greedy; the target's top-k / top-p
    (top_k=0 and top_p=1 switch them off). vLLM validates them; min_p is refused by the
    adapters' ``supports`` (vLLM does not apply it to speculative requests)."""
    v = _vllm()
    top_k, top_p = config.get("target_top_k"), config.get("target_top_p")
    return v.SamplingParams(
        temperature=float(temperature),
        top_k=0 if top_k is None else int(top_k),
        top_p=1.0 if top_p is None else float(top_p),
        seed=seed,
    )


def request(config: dict, temperature: float, seed: int | None = None) -> Request:
    params = sampling_params(config, temperature, seed)
    generator = None if seed is None else torch.Generator(device=DEVICE).manual_seed(seed)
    return Request(params, generator)


def sampling_metadata(requests: list[Request], vocab_size: int) -> Any:
    """``SamplingMetadata`` for ``requests`` (batch index = list index), field by field as
    ``InputBatch.add_request`` and ``_make_sampling_metadata`` fill it for requests without
    penalties, logprobs, allowed or bad words and logits processors."""
    v = _vllm()
    n = len(requests)
    greedy = [r.params.sampling_type == v.SamplingType.GREEDY for r in requests]
    all_greedy, all_random = all(greedy), not any(greedy)
    temperature = torch.tensor(
        [0.0 if g else r.params.temperature for g, r in zip(greedy, requests)], dtype=torch.float32
    )
    top_p = torch.tensor([r.params.top_p for r in requests], dtype=torch.float32)
    ks = [r.params.top_k if 0 < r.params.top_k < vocab_size else vocab_size for r in requests]
    has_top_k = any(0 < r.params.top_k < vocab_size for r in requests)
    return v.SamplingMetadata(
        temperature=None if all_greedy else temperature,
        all_greedy=all_greedy,
        all_random=all_random,
        top_p=top_p if any(r.params.top_p < 1 for r in requests) else None,
        top_k=torch.tensor(ks, dtype=torch.int32) if has_top_k else None,
        generators={i: r.generator for i, r in enumerate(requests) if r.generator is not None},
        max_num_logprobs=None,
        no_penalties=True,
        prompt_token_ids=None,
        frequency_penalties=torch.zeros(n, dtype=torch.float32),
        presence_penalties=torch.zeros(n, dtype=torch.float32),
        repetition_penalties=torch.ones(n, dtype=torch.float32),
        output_token_ids=[],
        allowed_token_ids_mask=None,
        bad_words_token_ids={},
        logitsprocs=v.LogitsProcessors(),
        logprob_token_ids=None,
        spec_token_ids=None,
        thinking_budget_state_holder=None,
    )


def spec_metadata(draft_token_ids: list[list[int]]) -> Any:
    """``SpecDecodeMetadata`` for one decode step whose request i has the draft tokens
    ``draft_token_ids[i]``, laid out as the model runner lays it out: request i's
    n_i + 1 logits rows are contiguous (n_i target rows, then its bonus row)."""
    v = _vllm()
    num_draft = np.array([len(d) for d in draft_token_ids], dtype=np.int32)
    num_sampled = num_draft + 1
    cu_sampled = np.cumsum(num_sampled, dtype=np.int32)
    cu_draft = np.cumsum(num_draft, dtype=np.int32)
    starts = cu_sampled - num_sampled
    target = np.concatenate([s + np.arange(n, dtype=np.int32) for s, n in zip(starts, num_draft)])
    flat = [t for d in draft_token_ids for t in d]
    return v.SpecDecodeMetadata(
        draft_token_ids=torch.tensor(flat, dtype=torch.int32),
        num_draft_tokens=num_draft.tolist(),
        cu_num_draft_tokens=torch.from_numpy(cu_draft),
        cu_num_sampled_tokens=torch.from_numpy(cu_sampled),
        target_logits_indices=torch.from_numpy(target.astype(np.int32)),
        bonus_logits_indices=torch.from_numpy((cu_sampled - 1).astype(np.int32)),
        logits_indices=torch.arange(int(cu_sampled[-1]), dtype=torch.int32),
    )


def sampler_law(logits, config: dict, temperature: float) -> np.ndarray:
    """vLLM's non-speculative law for one request: logits [V] (float32, as a model's) ->
    probs [V] float64: ``Sampler.apply_temperature`` then ``apply_top_k_top_p`` (the CPU
    build's pytorch path: ties at the k-th value are kept) then a float32 softmax; at
    T = 0 the one-hot of ``Sampler.greedy_sample``'s token."""
    v = _vllm()
    V = len(logits)
    x = torch.as_tensor(np.asarray(logits, dtype=np.float64), dtype=torch.float32)[None].clone()
    req = request(config, temperature)
    md = sampling_metadata([req], V)
    if md.all_greedy:
        out = np.zeros(V)
        out[int(v.Sampler.greedy_sample(x)[0])] = 1.0
        return out
    x = v.Sampler.apply_temperature(x, md.temperature, md.all_random)
    x = v.apply_top_k_top_p(x, md.top_k, md.top_p)
    return x.softmax(dim=-1, dtype=torch.float32)[0].double().numpy()
