"""The adapters of ``rheo.integrations.vllm`` (its docstring says what each one is)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from rheo.integrations.vllm.batch import (
    SAMPLING_PARAMETERS,
    Request,
    request,
    sampler_law,
    sampling_metadata,
    sampling_params,
    spec_metadata,
)
from rheo.integrations.vllm.loader import load_vllm


def is_chain(config: dict) -> bool:
    return config["K"] == 1 and config["policy"] == "rheo" and config["m"] == 0


def chain_length(config: dict) -> int:
    """L = min(depth, budget): the number of draft tokens of the cycle."""
    return int(min(config["depth"], config["budget"]))


def _vllm() -> Any:
    return load_vllm()


# docs/spec.md section 9 parameters vLLM has no request field for, or refuses under speculation
# (``SamplingParams._validate_spec_decode`` refuses logit_bias)
NOT_IN_VLLM = ("logit_bias", "sequence_bias", "no_repeat_ngram_size")


def vllm_has_the_sampling(config: dict) -> bool:
    """The sampling parameters of ``config`` are ones vLLM implements, in vLLM's variant:
    bad words matched against the output tokens only (``bad_words_scope`` "generated": the
    sampler passes ``output_token_ids`` to ``apply_bad_words``), the repetition penalty's
    sign form (``apply_repetition_penalties_torch``: ``l > 0 ? l / r : l * r``), no
    logit_bias, sequence_bias or no_repeat_ngram_size; and vLLM's ``SamplingParams``
    accepts the values (e.g. |frequency_penalty| <= 2)."""
    if any(config.get(k) is not None for k in NOT_IN_VLLM):
        return False
    if config.get("bad_words") and config.get("bad_words_scope", "prompt_and_generated") != "generated":
        return False
    if config.get("repetition_penalty") is not None and config.get("repetition_penalty_form", "sign") != "sign":
        return False
    if not any(config.get(k) is not None for k in SAMPLING_PARAMETERS):
        return True
    try:
        sampling_params(config, 1.0)
    except (_vllm().VLLMValidationError, ValueError):
        return False
    return True


def draft_law(logits: torch.Tensor, temperature: float, top_k: int | None) -> torch.Tensor:
    """The draft law the adapters' own drafter draws from: [n, V] logits -> float32
    softmax(logits / T) over the draft's top-k (ties at the k-th value kept)."""
    x = logits.to(torch.float32) / float(temperature)
    if top_k is not None and top_k < x.shape[-1]:
        kth = x.topk(int(top_k), dim=-1).values[:, -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    return x.softmax(dim=-1, dtype=torch.float32)


class VllmCycle:
    """One decode step of vLLM's speculative sampling on a chain: L draft tokens drawn one
    position at a time from the draft law (``draft``), the target logits at the root and at
    each draft prefix laid out as the model runner lays them out, and one
    ``RejectionSampler.forward``. ``bonus`` picks the bonus token's sampler: "native"
    (``TopKTopPSampler.forward_native``) or "cpu" (``forward_cpu``, the CPU build's own)."""

    follows_uniforms = False
    time_budget = 90  # seconds per statistical check: about 17 cycles a second under Triton's interpreter
    bonus = "native"
    draft_probs_given = True
    companion = False  # a greedy companion request before the request under test
    seeded = False

    def __init__(self) -> None:
        v = _vllm()
        self.vllm = v
        self.samplers: dict[int, Any] = {}
        self.seeds = 0

    # -- what is supported ------------------------------------------------------------
    def supports(self, config: dict) -> bool:
        """Chains; min_p refused (vLLM does not apply min_p to speculative requests); the
        sampling parameters vLLM implements, in its variants (``vllm_has_the_sampling``)."""
        if not is_chain(config) or chain_length(config) < 1:
            return False
        return not config.get("target_min_p") and vllm_has_the_sampling(config)

    def sampler_law(self, logits, config: dict, temperature: float, history: list[int] | None = None) -> np.ndarray:
        return sampler_law(logits, config, temperature, history)

    # -- the pieces ---------------------------------------------------------------------
    def spec_config(self, L: int) -> Any:
        return None

    def rejection_sampler(self, L: int) -> Any:
        rs = self.samplers.get(L)
        if rs is None:
            v = self.vllm
            sampler = v.Sampler()
            tk = sampler.topk_topp_sampler
            tk.forward = tk.forward_native if self.bonus == "native" else tk.forward_cpu
            rs = self.samplers[L] = v.RejectionSampler(sampler, spec_config=self.spec_config(L))
        return rs

    def requests(self, config: dict, temperature: float, rows: int) -> list[Request]:
        """The batch: ``rows`` copies of the request (each after its greedy companion when
        ``companion``)."""
        out = []
        for _ in range(rows):
            if self.companion:
                out.append(request(config, 0.0))
            seed = None
            if self.seeded:  # a fresh seed per request, from a counter: no draw of the adapter's own
                self.seeds += 1
                seed = self.seeds
            out.append(request(config, temperature, seed))
        return out

    def metadata(self, reqs: list[Request], V: int, spec: list[list[int]]) -> Any:
        """The batch's ``SamplingMetadata`` (``spec``: its ``spec_token_ids``, filled after drafting)."""
        return sampling_metadata(reqs, V, spec)

    def draft(
        self, logits: torch.Tensor, config: dict, temperature: float, md: Any, greedy: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One draft position for a batch: logits [n, V] -> (tokens [n], the law passed as
        draft_probs [n, V] or None). Drawn from the draft law (argmax at T = 0)."""
        if greedy:
            return logits.argmax(dim=-1), None
        q = draft_law(logits, temperature, config.get("draft_top_k"))
        return torch.multinomial(q, 1)[:, 0], (q if self.draft_probs_given else None)

    # -- one forward ----------------------------------------------------------------------
    def _run(self, draft_logits, target_logits, config: dict, temperature: float, rows: int) -> list[list[int]]:
        if not self.supports(config):
            raise NotImplementedError(f"{type(self).__name__} runs chains (K = 1, policy rheo, m = 0, no min_p) only")
        V, L = int(config["vocab_size"]), chain_length(config)
        reqs = self.requests(config, temperature, rows)
        spec: list[list[int]] = [[] for _ in reqs]  # the persistent batch's spec_token_ids, filled below
        md = self.metadata(reqs, V, spec)
        greedy = [r.params.temperature == 0 or r.params.sampling_type == self.vllm.SamplingType.GREEDY for r in reqs]
        paths: list[tuple[int, ...]] = [()] * len(reqs)
        probs: list[list[torch.Tensor]] = [[] for _ in reqs]
        for _ in range(L):
            rows_logits = torch.as_tensor(np.asarray(draft_logits(list(paths)), dtype=np.float64))
            tokens = torch.empty(len(reqs), dtype=torch.long)
            step = self.draft_step(rows_logits, config, temperature, md, greedy)
            for i, (t, q) in enumerate(step):
                tokens[i] = t
                if q is not None:
                    probs[i].append(q)
            paths = [p + (int(t),) for p, t in zip(paths, tokens.tolist())]
        drafts = [list(p) for p in paths]
        for s, d in zip(spec, drafts):  # as InputBatch.update_req_spec_token_ids before the forward
            s.extend(d)
        rows_t = []
        for p in paths:
            rows_t.append(np.asarray(target_logits([p[:j] for j in range(L + 1)]), dtype=np.float64))
        logits = torch.as_tensor(np.concatenate(rows_t), dtype=torch.float32)  # [num_tokens + batch, V]
        draft_probs = None
        if self.draft_probs_given:  # a greedy request's rows are never read (zeros)
            draft_probs = torch.stack([q for qs in probs for q in (qs or [torch.zeros(V)] * L)]).to(torch.float32)
        out = self.rejection_sampler(L)(spec_metadata(drafts), draft_probs, logits, md)
        tokens_out, _ = self.vllm.RejectionSampler.parse_output(out.sampled_token_ids, V)
        return [tokens_out[i] for i in range(len(reqs)) if not (self.companion and i % 2 == 0)]

    def draft_step(self, logits: torch.Tensor, config: dict, temperature: float, md: Any, greedy: list[bool]):
        """(token, draft law or None) per request of the batch at one draft position."""
        random = [i for i, g in enumerate(greedy) if not g]
        out: list[tuple[int, torch.Tensor | None]] = [(int(t), None) for t in logits.argmax(dim=-1).tolist()]
        if random:
            tokens, q = self.draft(logits[random], config, temperature, md, False)
            for j, i in enumerate(random):
                out[i] = (int(tokens[j]), None if q is None else q[j])
        return out

    def cycle(self, draft_logits, target_logits, config: dict, temperature: float) -> list[int]:
        return self._run(draft_logits, target_logits, config, temperature, 1)[0]


class _Rows:
    """``cycle_batch``: ``rows`` copies of the request in one vLLM batch (one forward call);
    each draw tensor's dim 0 is ``rows`` times a single request's, row r's draws its r-th
    slice (every request's tokens are contiguous)."""

    def cycle_batch(self, draft_logits, target_logits, config: dict, temperature: float, rows: int) -> list[list[int]]:
        return self._run(draft_logits, target_logits, config, temperature, int(rows))  # type: ignore[attr-defined]


class _Sampling:
    """Declares the sampling parameters vLLM applies itself (docs/vllm.md, "Sampling
    parameters"): the request's ``SamplingParams`` carry them and vLLM's rejection sampler
    and bonus sampler process the raw target logits."""

    sampling_parameters = SAMPLING_PARAMETERS


class VllmDraftProbs(_Sampling, _Rows, VllmCycle):
    """Draft tokens from the draft law (``torch.multinomial``), the law as ``draft_probs``."""


class VllmNoDraftProbs(_Sampling, _Rows, VllmCycle):
    """``draft_probs=None``: vLLM treats each draft token as drawn with probability 1
    (its ngram path); the tokens come from the draft law, independently of the verifier."""

    draft_probs_given = False


class VllmCpuBonus(_Rows, VllmCycle):
    """As ``VllmDraftProbs``, the bonus token from ``forward_cpu`` (fused Gumbel-argmax)."""

    bonus = "cpu"


class VllmMixedBatch(_Sampling, _Rows, VllmCycle):
    """A greedy companion (T = 0, same tables) then the request under test, one forward call."""

    companion = True


class VllmSeeded(_Sampling, VllmCycle):
    """A per-request seed, fresh each cycle (1, 2, 3, ...: vLLM makes a ``torch.Generator`` of it
    for the request's draws)."""

    seeded = True


class VllmProposerSampler(_Sampling, _Rows, VllmCycle):
    """Drafts with vLLM's ``compute_probs_and_sample_next_token`` (temperature only: vLLM's
    drafter ignores top-k/top-p and the config's draft_top_k)."""

    def draft_step(self, logits: torch.Tensor, config: dict, temperature: float, md: Any, greedy: list[bool]):
        tokens, probs = self.vllm.compute_probs_and_sample_next_token(logits.to(torch.float32).clone(), md)
        return [(int(t), probs[i]) for i, t in enumerate(tokens.tolist())]


class VllmSynthetic(_Rows, VllmCycle):
    """Lossy control: ``rejection_sample_method="synthetic"`` (acceptance at fixed rates
    0.8, 0.64, ... whatever the laws)."""

    def spec_config(self, L: int) -> Any:
        return SimpleNamespace(
            rejection_sample_method="synthetic", synthetic_acceptance_rates=[0.8 ** (i + 1) for i in range(L)]
        )


class VllmArgmaxDraft(_Rows, VllmCycle):
    """Lossy control: greedy drafts (the draft law's argmax) passed with the full draft
    softmax as ``draft_probs``, as if drawn from it."""

    def draft(self, logits, config, temperature, md, greedy):
        q = draft_law(logits, temperature, config.get("draft_top_k"))
        return q.argmax(dim=-1), q


class VllmStaleHistory(_Sampling, _Rows, VllmCycle):
    """Lossy control for the sampling parameters: ``SamplingMetadata.spec_token_ids`` left
    None, so vLLM sees only the tokens generated before the step (the penalty and bad-word
    state of the cycle's start) at every position, the bonus token's included."""

    def metadata(self, reqs: list[Request], V: int, spec: list[list[int]]) -> Any:
        return replace(sampling_metadata(reqs, V, spec), spec_token_ids=None)


class VllmBatched:
    """The batched protocol's ``verify_batch``: the fastpath's chain trees (their nodes are
    samples; ``sample_probs`` is the law each was drawn from) verified by ONE
    ``RejectionSampler.forward`` over the whole batch (per-request temperature and target
    filters). The gate's generator seeds torch's global generator inside
    ``torch.random.fork_rng`` for the call (vLLM draws from the global one)."""

    follows_uniforms = False

    def __init__(self) -> None:
        self.vllm = _vllm()
        sampler = self.vllm.Sampler()
        sampler.topk_topp_sampler.forward = sampler.topk_topp_sampler.forward_native
        self.rs = self.vllm.RejectionSampler(sampler)
        self.device = torch.device("cpu")

    def supports(self, config: dict) -> bool:
        return is_chain(config) and chain_length(config) >= 1 and not config.get("target_min_p")

    def sampler_law(self, logits, config: dict, temperature: float) -> np.ndarray:
        return sampler_law(logits, config, temperature)

    def verify_batch(self, tree, target_logits: torch.Tensor, params, temperature: torch.Tensor, generator) -> dict:
        b, V = target_logits.shape[0], target_logits.shape[-1]
        f = params.target_filters
        config = {"target_top_k": f.top_k, "target_top_p": None if f.top_p is None else float(f.top_p)}
        reqs = [request(config, float(t)) for t in temperature.tolist()]
        md = sampling_metadata(reqs, V)
        drafts, probs, rows = [], [], []
        for i in range(b):
            n = int(tree.num_nodes[i])
            drafts.append([int(t) for t in tree.tokens[i, :n].tolist()])
            dense = torch.zeros(n, V, dtype=torch.float32)
            dense.scatter_add_(1, tree.sample_ids[i, :n].long(), tree.sample_probs[i, :n].to(torch.float32))
            probs.append(dense)
            rows.append(target_logits[i, : n + 1].to(torch.float32))
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            out = self.rs(spec_metadata(drafts), torch.cat(probs).contiguous(), torch.cat(rows), md)
        ids = out.sampled_token_ids.long()
        lengths = (ids >= 0).sum(dim=1)
        tokens = torch.full((b, params.depth + 1), -1, dtype=torch.long)
        tokens[:, : ids.shape[1]] = ids.clamp(min=-1)
        return {"tokens": tokens, "lengths": lengths}
