"""A vLLM batch as the model runner builds it: requests (vLLM's ``SamplingParams`` plus the
generator the model runner makes for a seeded one), ``SamplingMetadata`` filled as
``InputBatch._make_sampling_metadata`` fills it (tests/test_vllm.py compares the two),
``SpecDecodeMetadata`` as ``GPUModelRunner._calc_spec_decode_metadata`` lays it out, and
vLLM's non-speculative sampler law."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rheo.integrations.vllm.loader import load_vllm

DEVICE = torch.device("cpu")


def _vllm() -> Any:
    return load_vllm()


@dataclass
class Request:
    """One request of a batch: its vLLM ``SamplingParams``, the generator of a seeded one
    (``torch.Generator().manual_seed(seed)``, as ``GPUModelRunner`` makes it) else None, its
    prompt token ids and its output token ids so far (``CachedRequestState.output_token_ids``:
    the config's ``generated``)."""

    params: Any
    generator: torch.Generator | None = None
    prompt: list[int] = field(default_factory=list)
    output: list[int] = field(default_factory=list)


# The sampling parameters vLLM applies itself under speculative decoding (the config keys of
# docs/spec.md section 9 that the adapters pass to vLLM's ``SamplingParams``).
SAMPLING_PARAMETERS = frozenset(
    {"repetition_penalty", "frequency_penalty", "presence_penalty", "bad_words", "allowed_token_ids", "min_tokens"}
)


class WordTokenizer:
    """The least tokenizer ``SamplingParams.update_from_tokenizer`` needs, so that vLLM turns a
    request's ``bad_words`` (strings) into ``bad_words_token_ids`` itself: the word "w<i>"
    encodes to the i-th bad word's ids, with or without a leading space (so vLLM's
    prefix-space variant is the same word and is not added twice)."""

    def __init__(self, words: list[list[int]], vocab_size: int) -> None:
        self.words = {f"w{i}": [int(t) for t in w] for i, w in enumerate(words)}
        self.max_token_id = int(vocab_size) - 1

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(self.words[text.strip()])


def sampling_params(config: dict, temperature: float, seed: int | None = None) -> Any:
    """vLLM's ``SamplingParams`` for a config: T = 0 is greedy; the target's top-k / top-p
    (top_k=0 and top_p=1 switch them off); the sampling parameters of docs/spec.md section 9
    that vLLM has (``repetition_penalty``, ``frequency_penalty``, ``presence_penalty``,
    ``allowed_token_ids``, ``min_tokens``, ``bad_words``). vLLM validates them; ``bad_words``
    are tokenized by vLLM's ``update_from_tokenizer`` (with ``WordTokenizer``) and the
    end-of-sequence ids are given as the engine gives them
    (``update_from_generation_config``). min_p is refused by the adapters' ``supports``
    (vLLM does not apply it to speculative requests)."""
    v = _vllm()
    top_k, top_p = config.get("target_top_k"), config.get("target_top_p")
    bad = config.get("bad_words")
    allowed = config.get("allowed_token_ids")
    rep, freq, pres = config.get("repetition_penalty"), config.get("frequency_penalty"), config.get("presence_penalty")
    params = v.SamplingParams(
        temperature=float(temperature),
        top_k=0 if top_k is None else int(top_k),
        top_p=1.0 if top_p is None else float(top_p),
        seed=seed,
        repetition_penalty=1.0 if rep is None else float(rep),
        frequency_penalty=0.0 if freq is None else float(freq),
        presence_penalty=0.0 if pres is None else float(pres),
        allowed_token_ids=None if allowed is None else [int(t) for t in allowed],
        min_tokens=int(config.get("min_tokens") or 0),
        bad_words=[f"w{i}" for i in range(len(bad))] if bad else None,
    )
    eos = config.get("eos_token_id")
    if eos is not None:
        eos = [int(eos)] if isinstance(eos, int) else [int(t) for t in eos]
        if eos:
            params.update_from_generation_config({"eos_token_id": eos}, eos[0])
    if bad:
        params.update_from_tokenizer(WordTokenizer(bad, int(config["vocab_size"])))
    return params


def request(config: dict, temperature: float, seed: int | None = None) -> Request:
    params = sampling_params(config, temperature, seed)
    generator = None if seed is None else torch.Generator(device=DEVICE).manual_seed(seed)
    prompt = [int(t) for t in config.get("prompt") or []]
    return Request(params, generator, prompt, [int(t) for t in config.get("generated") or []])


def sampling_metadata(requests: list[Request], vocab_size: int, spec_token_ids: list[list[int]] | None = None) -> Any:
    """``SamplingMetadata`` for ``requests`` (batch index = list index), field by field as
    ``InputBatch.add_request`` and ``_make_sampling_metadata`` fill it (no logprobs):
    penalties (the tensors, and ``prompt_token_ids`` padded with ``vocab_size``, only when
    some request has one), ``output_token_ids`` (each request's output list, when penalties
    or bad words need it), ``spec_token_ids`` (the step's draft tokens per request: the
    lists given, which the caller may fill after drafting, as ``update_req_spec_token_ids``
    fills the persistent batch's), ``allowed_token_ids_mask`` (True = banned),
    ``bad_words_token_ids``, and the logits processors a speculative engine has
    (``build_logitsprocs`` with a speculative config: one ``MinTokensLogitsProcessor``,
    its state updated with the requests added, as ``InputBatch.refresh_metadata`` does)."""
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
    ps = [r.params for r in requests]
    no_penalties = all(p.repetition_penalty == 1.0 and p.frequency_penalty == 0 and p.presence_penalty == 0 for p in ps)
    prompt_token_ids = None
    if not no_penalties:
        width = max(len(r.prompt) for r in requests)
        prompt_token_ids = torch.full((n, width), vocab_size, dtype=torch.int64)
        for i, r in enumerate(requests):
            prompt_token_ids[i, : len(r.prompt)] = torch.tensor(r.prompt, dtype=torch.int64)
    bad_words = {i: p.bad_words_token_ids for i, p in enumerate(ps) if p.bad_words_token_ids}
    allowed = None
    if any(p.allowed_token_ids for p in ps):
        allowed = torch.zeros(n, vocab_size, dtype=torch.bool)
        for i, p in enumerate(ps):
            if p.allowed_token_ids:
                allowed[i] = True
                allowed[i][p.allowed_token_ids] = False
    min_tokens = v.MinTokensLogitsProcessor(None, DEVICE, False)  # its vllm_config is not read
    builder = v.BatchUpdateBuilder()  # as InputBatch._register_add_request records each request
    builder.added.extend((i, r.params, r.prompt, r.output) for i, r in enumerate(requests))
    min_tokens.update_state(builder.get_and_reset(n))
    return v.SamplingMetadata(
        temperature=None if all_greedy else temperature,
        all_greedy=all_greedy,
        all_random=all_random,
        top_p=top_p if any(r.params.top_p < 1 for r in requests) else None,
        top_k=torch.tensor(ks, dtype=torch.int32) if has_top_k else None,
        generators={i: r.generator for i, r in enumerate(requests) if r.generator is not None},
        max_num_logprobs=None,
        no_penalties=no_penalties,
        prompt_token_ids=prompt_token_ids,
        frequency_penalties=torch.tensor([p.frequency_penalty for p in ps], dtype=torch.float32),
        presence_penalties=torch.tensor([p.presence_penalty for p in ps], dtype=torch.float32),
        repetition_penalties=torch.tensor([p.repetition_penalty for p in ps], dtype=torch.float32),
        output_token_ids=[r.output for r in requests] if (not no_penalties or bad_words) else [],
        allowed_token_ids_mask=allowed,
        bad_words_token_ids=bad_words,
        logitsprocs=v.LogitsProcessors([min_tokens]),
        logprob_token_ids=None,
        spec_token_ids=[[] for _ in requests] if spec_token_ids is None else spec_token_ids,
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


def sampler_law(logits, config: dict, temperature: float, history: list[int] | None = None) -> np.ndarray:
    """vLLM's non-speculative law for one request: logits [V] (float32, as a model's) ->
    probs [V] float64: with sampling parameters, ``Sampler.apply_logits_processors`` (allowed
    tokens, bad words, min_tokens, penalties) for the request whose prompt is the config's
    and whose output is the rest of ``history`` (the config's ``generated`` without one);
    then ``Sampler.apply_temperature`` and ``apply_top_k_top_p`` (the CPU build's pytorch
    path: ties at the k-th value are kept) and a float32 softmax; at T = 0 the one-hot of
    ``Sampler.greedy_sample``'s token."""
    v = _vllm()
    V = len(logits)
    x = torch.as_tensor(np.asarray(logits, dtype=np.float64), dtype=torch.float32)[None].clone()
    req = request(config, temperature)
    if history is not None:
        req.output = [int(t) for t in history[len(req.prompt) :]]
    md = sampling_metadata([req], V)
    x = v.Sampler().apply_logits_processors(x, md, predict_bonus_token=False)
    if md.all_greedy:
        out = np.zeros(V)
        out[int(v.Sampler.greedy_sample(x)[0])] = 1.0
        return out
    x = v.Sampler.apply_temperature(x, md.temperature, md.all_random)
    x = v.apply_top_k_top_p(x, md.top_k, md.top_p)
    return x.softmax(dim=-1, dtype=torch.float32)[0].double().numpy()
