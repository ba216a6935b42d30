"""SGLang's EAGLE verify step, judged through the ``--impl`` protocol (docs/engines.md,
"SGLang").

SGLang has no CPU server without a CPU build of its kernels, but its verify step,
``sglang.srt.speculative.eagle_utils.eagle_sample``, is an ordinary function of a verify
input (the draft tokens and their tree), a batch (its sampling settings) and the target's
logits. Each adapter here drafts a chain (EAGLE with ``speculative_eagle_topk=1``) from the
case's draft law, lays it out as SGLang's EAGLE worker does (node 0 the last verified token,
nodes 1..L the drafts; ``retrieve_index``, ``retrieve_next_token``, ``retrieve_next_sibling``),
calls ``eagle_sample`` unmodified, and returns the tokens it commits
(``predict[accept_index[:accept_lens]]``). Which branch ``eagle_sample`` takes is SGLang's
own decision, from its platform flags and its server settings:

- ``SglangEagleCpu``: the branch SGLang's CPU build takes (``SGLANG_USE_CPU_ENGINE=1``:
  ``eagle_utils._is_cpu``). ``_verify_uses_greedy`` is true on CPU whatever the temperature,
  so the verify step commits the target's argmax (``verify_tree_greedy_func``) for sampled
  requests too. The CPU build runs that op in ``sgl_kernel``'s C++ (``verify_tree_greedy_cpu``),
  which has no wheel to install here; SGLang's own Triton implementation of the same op (its
  XPU path, ``verify_tree_greedy_triton``) runs in its place. Drafts greedy (top-1), as
  EAGLE's drafter picks them.
- ``SglangEagleRejection``: ``--speculative-use-rejection-sampling`` on an AMD GPU (ROCm),
  SGLang's all-Triton sampled path: the chain rejection kernel
  ``chain_speculative_sampling_triton`` with the draft law as ``draft_probs``, and the
  top-k / top-p renormalisation SGLang resolves on ROCm (``renorm_triton``), all run by
  Triton's interpreter here (``TRITON_INTERPRET=1``); drafts sampled from the draft law.
  ``eagle_utils``'s platform flags are set as on ROCm for the call (``_is_hip``). On NVIDIA
  the same kernel runs with FlashInfer's renormalisation, which does not run here.
- ``SglangEagleBlock``: the same with ``--speculative-use-block-verification`` (the kernel's
  block-verification branch, Sun et al. 2024's Algorithm 2).

GPU's default sampled branch, ``tree_speculative_sampling_target_only``, is a CUDA kernel
compiled at run time (``tvm_ffi``): it does not run here.

The server settings ``eagle_sample`` reads (``get_spec()``: rejection sampling, block
verification, the acceptance thresholds; ``get_parallel()``: one tensor-parallel rank) come
from stand-ins for the published server context, set for the call only. Sampling settings:
temperature, top-k and top-p, composed as the verify step composes them (softmax at T, then
``top_k_renorm_prob``, then ``top_p_renorm_prob``: top-p over the renormalised top-k law);
penalties and min-p are not drawn. Its renormalisation follows FlashInfer's threshold
semantics, which keep every token tied with the pivot (top-k keeps all tokens as likely as
the k-th; top-p sorts ascending and drops the prefix whose mass is below 1 - p), so where
probabilities tie at the cut SGLang's law differs from the gate's default (docs/spec.md §0:
ties broken by token id). ``sampler_law`` states SGLang's, and the output law is judged
against it.

Needs ``sglang`` (the wheel with ``--no-deps`` and its import requirements; ``.ci/engines``
makes the venv) and Triton.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch


def is_chain(config: dict) -> bool:
    return config["K"] == 1 and config["policy"] == "rheo" and config["m"] == 0


def chain_length(config: dict) -> int:
    """L = min(depth, budget): the draft tokens of the cycle."""
    return int(min(config["depth"], config["budget"]))


def _eagle_utils() -> Any:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # the rejection kernel on the CPU
    with warnings.catch_warnings():  # import-time notices about GPU-only quantisation kernels
        warnings.simplefilter("ignore")
        from sglang.srt.speculative import eagle_utils

    return eagle_utils


def renormalised_law(logits: np.ndarray, temperature: float, top_k: Any, top_p: Any) -> np.ndarray:
    """softmax(logits / T), then top-k, then top-p over the renormalised law, each keeping the
    tokens tied with its pivot (``renorm_triton``'s and FlashInfer's semantics); T = 0: the
    argmax (``torch.argmax``: the lowest id among ties)."""
    V = len(logits)
    if temperature == 0:
        law = np.zeros(V)
        law[int(np.argmax(logits))] = 1.0
        return law
    z = logits / float(temperature)
    p = np.exp(z - np.max(z))
    p /= p.sum()
    if top_k is not None and int(top_k) < V:
        pivot = np.sort(p)[::-1][max(int(top_k) - 1, 0)]
        p = np.where(p >= pivot, p, 0.0)
        p /= p.sum()
    if top_p is not None and float(top_p) < 1.0:
        ascending = np.sort(p)
        cut = min(int(np.searchsorted(np.cumsum(ascending), 1.0 - float(top_p), side="left")), V - 1)
        p = np.where(p >= ascending[cut], p, 0.0)
        p /= p.sum()
    return p


def _prepare_on_cpu(probs: torch.Tensor) -> torch.Tensor:
    """``renorm_triton._prepare_probs`` without its device check (the kernels run on the CPU
    under Triton's interpreter): a 2-D float32 contiguous copy, as it returns on a GPU."""
    if probs.ndim != 2:
        raise ValueError(f"probs must be 2D, got shape={tuple(probs.shape)}")
    return probs.float().contiguous()


class SglangEagleCpu:
    """SGLang's EAGLE verify step as its CPU build runs it (the module docstring)."""

    follows_uniforms = False
    time_budget = 90  # seconds per statistical check
    rejection_sampling = False
    block_verification = False
    on_cpu = True  # SGLang's platform flags for the call: the CPU build (else ROCm's)
    sample_drafts = False  # EAGLE's top-1 drafts; the rejection kernel's drafts are sampled

    def __init__(self) -> None:
        self.eagle = _eagle_utils()

    def sampler_law(self, logits: Any, config: dict, temperature: float) -> np.ndarray:
        """The law the verify step targets (module docstring), in float64."""
        return renormalised_law(
            np.asarray(logits, dtype=np.float64), temperature, config.get("target_top_k"), config.get("target_top_p")
        )

    def supports(self, config: dict) -> bool:
        """Chains without min-p (no sampling parameters are declared, so none are drawn)."""
        return is_chain(config) and chain_length(config) >= 1 and not config.get("target_min_p")

    @contextlib.contextmanager
    def server(self) -> Iterator[None]:
        """The server settings eagle_sample reads, for one call."""
        from sglang.srt import runtime_context

        spec = SimpleNamespace(
            speculative_use_rejection_sampling=self.rejection_sampling,
            speculative_use_block_verification=self.block_verification,
            speculative_accept_threshold_single=1.0,
            speculative_accept_threshold_acc=1.0,
        )
        parallel = SimpleNamespace(tp_group=SimpleNamespace(world_size=1), attn_tp_group=SimpleNamespace(world_size=1))
        from sglang.kernels.ops.sampling import renorm_triton
        from sglang.kernels.ops.speculative import spec_tree

        e = self.eagle
        names = ("get_spec", "_is_cpu", "_is_hip", "top_k_renorm_prob", "top_p_renorm_prob")
        saved = {k: getattr(e, k) for k in names}, runtime_context.get_parallel, spec_tree._is_xpu
        prepare = renorm_triton._prepare_probs
        e.get_spec = lambda: spec
        e._is_cpu, e._is_hip = self.on_cpu, not self.on_cpu  # the CPU build, or ROCm
        if not self.on_cpu:  # the renormalisation ops as SGLang resolves them on ROCm
            e.top_k_renorm_prob = renorm_triton.top_k_renorm_probs_triton
            e.top_p_renorm_prob = renorm_triton.top_p_renorm_probs_triton
            renorm_triton._prepare_probs = _prepare_on_cpu  # its one line that wants a GPU tensor
        runtime_context.get_parallel = lambda: parallel
        spec_tree._is_xpu = True  # the greedy op: SGLang's Triton implementation (the C++ one is not here)
        try:
            yield
        finally:
            for k, v in saved[0].items():
                setattr(e, k, v)
            runtime_context.get_parallel, spec_tree._is_xpu = saved[1], saved[2]
            renorm_triton._prepare_probs = prepare

    def draft(self, logits: torch.Tensor, temperature: float) -> tuple[int, torch.Tensor]:
        """One draft token from [V] logits and the law passed as draft_probs (float32)."""
        q = torch.softmax(logits.to(torch.float32) / max(float(temperature), 1e-6), dim=-1)
        if self.sample_drafts and temperature > 0:
            return int(torch.multinomial(q, 1)[0]), q
        return int(torch.argmax(logits)), q

    def cycle(self, draft_logits, target_logits, config: dict, temperature: float) -> list[int]:
        if not self.supports(config):
            raise NotImplementedError(f"{type(self).__name__} verifies chains (K = 1, policy rheo, m = 0) only")
        V, L = int(config["vocab_size"]), chain_length(config)
        path: tuple[int, ...] = ()
        laws: list[torch.Tensor] = []
        for _ in range(L):
            logits = torch.as_tensor(np.asarray(draft_logits([path]), dtype=np.float64)[0])
            token, q = self.draft(logits, temperature)
            path, laws = path + (token,), laws + [q]
        rows = np.asarray(target_logits([path[:j] for j in range(L + 1)]), dtype=np.float64)
        n = L + 1
        k, p = config.get("target_top_k"), config.get("target_top_p")
        sampling = SimpleNamespace(
            temperatures=torch.tensor([[float(temperature) if temperature > 0 else 1.0]], dtype=torch.float32),
            top_ks=torch.tensor([int(k) if k is not None else V], dtype=torch.int32),
            top_ps=torch.tensor([float(p) if p is not None else 1.0], dtype=torch.float32),
            need_top_k_sampling=k is not None and int(k) < V,
            need_top_p_sampling=p is not None and float(p) < 1.0,
            need_min_p_sampling=False,
            is_all_greedy=temperature == 0,
            sampling_seed=None,
            acc_additive_penalties=None,
            acc_scaling_penalties=None,
            logit_bias=None,
            has_watermark_candidates=False,
        )
        verify = SimpleNamespace(
            draft_token=torch.tensor((0, *path), dtype=torch.int64),  # node 0: the last verified token
            draft_token_num=n,
            retrieve_index=torch.arange(n, dtype=torch.int64)[None],
            retrieve_next_token=torch.tensor([[*range(1, n), -1]], dtype=torch.int64),
            retrieve_next_sibling=torch.full((1, n), -1, dtype=torch.int64),
            max_tree_depth=n,
            tree_topk=1,
            draft_probs=torch.stack(laws)[None].contiguous(),  # [1, L, V]: row j the law draft j + 1 came from
            custom_mask=None,
            positions=None,
        )
        batch = SimpleNamespace(
            forward_mode=SimpleNamespace(is_idle=lambda: False),
            seq_lens=torch.tensor([8], dtype=torch.int64),
            sampling_info=sampling,
            device="cpu",
            return_logprob=False,
        )
        out = SimpleNamespace(next_token_logits=torch.as_tensor(rows, dtype=torch.float32).contiguous())
        with self.server():
            predict, accept_lens, accept_index = self.eagle.eagle_sample(verify, batch, out)
        emitted = accept_index[0, : int(accept_lens[0])].tolist()
        return [int(predict[i]) for i in emitted]


class SglangEagleRejection(SglangEagleCpu):
    """``--speculative-use-rejection-sampling`` as on a GPU: the Triton chain kernel."""

    rejection_sampling = True
    on_cpu = False
    sample_drafts = True


class SglangEagleBlock(SglangEagleRejection):
    """The same with ``--speculative-use-block-verification``."""

    block_verification = True
