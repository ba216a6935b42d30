"""vLLM's own rejection sampler through the gate (rheo.integrations.vllm, docs/vllm.md):
each adapter's output-law verdict at a small number of cycles on chain cases (the lossless
ones pass, the two lossy controls are rejected), the batch metadata against vLLM's own
``InputBatch``, ``sampler_law`` against vLLM's ``Sampler`` frequencies. The one-line message
when vLLM is missing is tests/test_vllm_missing.py's (it runs without vLLM)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from rheo.integrations import vllm as rv

HAS_VLLM = importlib.util.find_spec("vllm") is not None

if not HAS_VLLM:
    pytest.skip(rv.INSTALL, allow_module_level=True)

import torch  # noqa: E402

from rheo.casefile import load_case  # noqa: E402
from rheo.checks.protocol.inputs import draft_logits_fn, protocol_config, target_logits_fn  # noqa: E402
from rheo.checks.protocol.load import Implementation, load_implementation  # noqa: E402
from rheo.checks.statistics.output_law import check_output_law  # noqa: E402
from rheo.reference.generate import hashed_case  # noqa: E402

MODULE = "rheo.integrations.vllm"
LOSSLESS = [
    "VllmDraftProbs",
    "VllmNoDraftProbs",
    "VllmProposerSampler",
    "VllmMixedBatch",
    "VllmSeeded",
    "VllmCpuBonus",
]
LOSSY = ["VllmSynthetic", "VllmArgmaxDraft"]
CHAIN = hashed_case(3, 3, 2, policy="rheo", K=1, m=0, budget=2, beam=1, temperature="1/2", target_top_p="9/10")
CHAIN_TOP_K = hashed_case(3, 7, 2, policy="rheo", K=1, m=0, budget=2, beam=1, temperature="1", target_top_k=2)
GREEDY = hashed_case(3, 1, 2, policy="rheo", K=1, m=0, budget=2, beam=1, temperature="0")
CASES = [CHAIN, CHAIN_TOP_K]

_LOADED: dict[str, Implementation] = {}


def impl(name: str) -> Implementation:
    if name not in _LOADED:
        _LOADED[name] = load_implementation(f"{MODULE}:{name}")
    return _LOADED[name]


def inputs(case: dict):
    inst = load_case(case)
    return draft_logits_fn(inst), target_logits_fn(inst), protocol_config(inst)


@pytest.mark.parametrize("name", LOSSLESS)
def test_a_lossless_adapter_passes_the_output_law(name):
    out = check_output_law(impl(name), 400, level="smoke", cases=CASES, min_cases=1)
    assert out.passed, out.detail


@pytest.mark.parametrize("name", LOSSY)
def test_a_lossy_control_is_rejected_by_the_output_law(name):
    out = check_output_law(impl(name), 1000, level="smoke", cases=CASES, min_cases=1)
    assert not out.passed and "not lossless" in out.detail, out.detail


def test_greedy_cycles_emit_the_target_argmax_path():
    d, t, cfg = inputs(GREEDY)
    path: tuple[int, ...] = ()
    for _ in range(3):
        path += (int(np.argmax(t([path])[0])),)
    for name in ("VllmDraftProbs", "VllmMixedBatch"):
        out = impl(name).obj.cycle(d, t, cfg, 0.0)
        assert tuple(out) == path[: len(out)] and len(out) >= 1, (name, out)


def test_supports_chains_without_min_p():
    a = impl("VllmDraftProbs").obj
    _, _, cfg = inputs(CHAIN)
    assert a.supports(cfg)
    assert not a.supports({**cfg, "target_min_p": 0.2})
    assert not a.supports({**cfg, "K": 2})
    assert not hasattr(impl("VllmSeeded").obj, "cycle_batch")


def test_cycle_batch_gives_one_row_per_copy():
    d, t, cfg = inputs(CHAIN)
    rows = impl("VllmDraftProbs").obj.cycle_batch(d, t, cfg, 0.5, 5)
    assert len(rows) == 5 and all(1 <= len(r) <= 3 for r in rows)


def test_sampler_law_is_the_frequencies_of_vllms_own_sampler():
    """``sampler_law`` against 20,000 draws of vLLM's ``Sampler`` (forward_native) on the
    same logits and request: chi-square at 1e-4."""
    from scipy.stats import chisquare

    v = rv.load_vllm()
    _, t, cfg = inputs(CHAIN_TOP_K)
    logits = np.asarray(t([()])[0], dtype=np.float64)
    law = rv.sampler_law(logits, cfg, 1.0)
    n = 20000
    md = rv.sampling_metadata([rv.batch.request(cfg, 1.0) for _ in range(n)], len(logits))
    sampler = v.Sampler()
    sampler.topk_topp_sampler.forward = sampler.topk_topp_sampler.forward_native
    x = torch.as_tensor(logits, dtype=torch.float32).repeat(n, 1)
    tokens = sampler(x, md).sampled_token_ids.flatten().numpy()
    counts = np.bincount(tokens, minlength=len(logits))
    support = law > 0
    assert counts[~support].sum() == 0
    expected = law[support] / law[support].sum() * counts.sum()
    assert chisquare(counts[support], expected).pvalue > 1e-4


def test_the_metadata_is_what_vllms_input_batch_makes():
    """``sampling_metadata`` against ``InputBatch._make_sampling_metadata`` for a greedy, a
    top-p, a top-k and a seeded request (an InputBatch needs no model)."""
    import warnings

    rv.load_vllm()  # first: it imports triton under its interpreter
    with warnings.catch_warnings():  # vLLM's worker modules warn at import (torch.jit deprecations)
        warnings.simplefilter("ignore")
        from vllm.v1.worker.gpu_input_batch import CachedRequestState, InputBatch

    V = 7
    cases = [({}, 0.0, None), ({"target_top_p": 0.9}, 0.5, None), ({"target_top_k": 3}, 1.0, 11), ({}, 2.0, None)]
    reqs = [rv.batch.request(cfg, T, seed) for cfg, T, seed in cases]
    ib = InputBatch(
        max_num_reqs=8,
        max_model_len=16,
        max_num_batched_tokens=64,
        device=torch.device("cpu"),
        vocab_size=V,
        block_sizes=[16],
        max_num_blocks_per_req=[1],
        num_spec_tokens=2,
    )
    for i, r in enumerate(reqs):
        ib.add_request(
            CachedRequestState(
                req_id=f"r{i}",
                prompt_token_ids=[0],
                mm_features=[],
                sampling_params=r.params,
                generator=r.generator,
                block_ids=([0],),
                num_computed_tokens=0,
                output_token_ids=[],
            )
        )
    ib.refresh_metadata()
    theirs, ours = ib.sampling_metadata, rv.sampling_metadata(reqs, V)
    assert (theirs.all_greedy, theirs.all_random) == (ours.all_greedy, ours.all_random)
    # the penalty tensors are read only when no_penalties is False: InputBatch leaves them
    # uncopied (uninitialised memory) otherwise, so only no_penalties is compared
    for field in ("temperature", "top_p", "top_k"):
        a, b = getattr(theirs, field), getattr(ours, field)
        assert (a is None) == (b is None), field
        if a is not None:
            assert a.dtype == b.dtype and torch.equal(a, b), (field, a, b)
    assert set(theirs.generators) == set(ours.generators) == {2}
    assert theirs.no_penalties and ours.no_penalties
    assert theirs.max_num_logprobs is None and ours.max_num_logprobs is None
    assert theirs.allowed_token_ids_mask is None and not theirs.bad_words_token_ids


def test_the_batched_verifier_passes_the_batched_output_law():
    """``VllmBatched.verify_batch``: the fastpath's chain trees, one RejectionSampler.forward per batch."""
    from rheo.checks.statistics.batched import check_output_law_batched

    out = check_output_law_batched(impl("VllmBatched"), 1000, level="smoke", extra_cases=[CHAIN_TOP_K], min_cases=1)
    assert out.passed, out.detail


# ---- exact certification through vLLM's kernels (rheo.checks.exact.concrete) ----

EXACT = hashed_case(3, 5, 1, policy="rheo", K=1, m=0, budget=1, beam=1, temperature="1")  # one draft token
NATIVE = ["VllmDraftProbs", "VllmNoDraftProbs", "VllmProposerSampler", "VllmMixedBatch", "VllmSeeded"]


@pytest.mark.parametrize("name", NATIVE)
def test_exact_certification_certifies_vllms_sampler_through_its_kernels(name):
    from rheo.checks.exact.certify import certify_implementation

    cert = certify_implementation(impl(name), EXACT)
    assert cert.verdict == "lossless", cert.summary()
    assert cert.draws == "concrete"  # the kernels and in-place races were followed from the outside


def test_exact_certification_refuses_the_fused_cpu_bonus_with_its_line():
    from rheo.checks.exact.certify import certify_implementation

    cert = certify_implementation(impl("VllmCpuBonus"), EXACT)
    assert cert.verdict == "unsupported"
    assert "torch.randint over 2147483648 values at" in cert.detail and "topk_topp_sampler.py" in cert.detail
    assert "native" in cert.detail


@pytest.mark.parametrize("name", LOSSY)
def test_exact_certification_finds_the_lossy_controls(name):
    from rheo.checks.exact.certify import certify_implementation

    cert = certify_implementation(impl(name), EXACT)
    assert cert.verdict == "not lossless", cert.summary()
    assert cert.deviation is not None and cert.deviation > 0.01


# ---- vLLM's kernels at a real vocabulary size (docs/gate.md, "Races over a whole vocabulary") ----


def test_vllms_kernels_are_certified_at_a_real_vocabulary_size_through_group_tests():
    """V = 8,193 (two tiles of 4,096 and one lane), draft and target supports disjoint: every
    draft is rejected, the recovered token's race over the whole vocabulary is read by group
    tests. With the tile-edge drafts, one draft has p / q = 1 and is always accepted: its
    recovered token's race is never read, which would take a run per token to show, so the
    certification stops there, naming vLLM's draw."""
    from rheo.checks.cases.vocab import vocab_case
    from rheo.checks.exact.certify import certify_implementation

    cert = certify_implementation(impl("VllmDraftProbs"), vocab_case(8_193, "disjoint supports"))
    assert cert.verdict == "lossless" and cert.draws == "concrete", cert.summary()
    assert cert.runs < 8_193  # fewer runs than tokens: the group tests, not a run per token
    refused = certify_implementation(impl("VllmDraftProbs"), vocab_case(8_193, "tile edges"))
    assert refused.verdict == "unsupported"
    assert "rejection_sampler.py" in refused.detail and "takes a run per token (8,193 runs)" in refused.detail


def test_vllms_kernels_are_certified_exactly_at_qwen_size():
    """V = 151,936 (Qwen 2), disjoint supports, through Triton's interpreter: about 4,000
    runs of vLLM's sampler and rejection kernels, each over the whole vocabulary (about 9
    minutes on 2 cores, the longest test of this step; docs/vllm.md)."""
    from rheo.checks.cases.vocab import vocab_case
    from rheo.checks.exact.certify import certify_implementation

    cert = certify_implementation(impl("VllmDraftProbs"), vocab_case(151_936, "disjoint supports"))
    assert cert.verdict == "lossless" and cert.draws == "concrete", cert.summary()
    assert cert.deviation is not None and cert.deviation < 1e-6
