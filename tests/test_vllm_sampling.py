"""Sampling parameters (docs/spec.md section 9) applied by vLLM itself under speculative
decoding (docs/vllm.md, "Sampling parameters"): vLLM's own ``SamplingParams`` validation
refuses logit_bias and min_p for a speculative request; the adapters refuse the variants
vLLM does not implement; the batch metadata is what vLLM's ``InputBatch`` makes; and one
exact certification per parameter through vLLM's rejection sampler and bonus sampler
(small cases: V = 3, one draft token). min_tokens is lossy at the bonus token when the
step's draft tokens reach min_tokens (examples/upstream/vllm_min_tokens_bonus.py)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from rheo.integrations import vllm as rv

HAS_VLLM = importlib.util.find_spec("vllm") is not None

if not HAS_VLLM:
    pytest.skip(rv.INSTALL, allow_module_level=True)

import torch  # noqa: E402

from rheo.checks.protocol.load import Implementation, load_implementation  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODULE = "rheo.integrations.vllm"
_LOADED: dict[str, Implementation] = {}


def impl(name: str) -> Implementation:
    if name not in _LOADED:
        _LOADED[name] = load_implementation(f"{MODULE}:{name}")
    return _LOADED[name]


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


# one case per parameter (examples/vllm_sampling/<parameter>.json): a chain of one draft token
# at V = 3, T = 1, raw target logits of both signs, the parameter moving the law at the verified
# position and at the bonus position
CASES = {p.stem: read(p) for p in sorted((ROOT / "examples" / "vllm_sampling").glob("*.json"))}
# min_tokens 1 with nothing generated: the bonus position (one token after the draft) may end
# the sequence, but vLLM's bonus sampler still masks the eos id
MIN_TOKENS_BONUS = read(ROOT / "examples" / "upstream" / "vllm_min_tokens_bonus.json")


def config_of(c: dict) -> dict:
    from rheo.casefile import load_case
    from rheo.checks.protocol.inputs import protocol_config

    return protocol_config(load_case(c))


def test_vllms_own_validation_refuses_logit_bias_and_min_p_for_a_speculative_request(tmp_path):
    """``SamplingParams.verify(model_config, speculative_config, ...)`` with real vLLM configs,
    built on the CPU: a ``ModelConfig`` of a tiny local Llama config (no weights, no
    tokenizer) and an ngram ``SpeculativeConfig``. ``_validate_spec_decode`` refuses
    logit_bias and min_p; without the speculative config both pass; the parameters the
    adapters pass are accepted."""
    rv.load_vllm()  # first: it imports triton under its interpreter
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from vllm import SamplingParams
        from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
        from vllm.exceptions import VLLMValidationError

        llama = {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "num_hidden_layers": 1,
            "vocab_size": 8,
            "max_position_embeddings": 64,
            "rms_norm_eps": 1e-6,
            "torch_dtype": "float32",
            "bos_token_id": 0,
            "eos_token_id": 1,
        }
        (tmp_path / "config.json").write_text(json.dumps(llama))
        model = ModelConfig(model=str(tmp_path), skip_tokenizer_init=True, dtype="float32", max_model_len=64)
        spec = SpeculativeConfig(
            method="ngram",
            num_speculative_tokens=2,
            prompt_lookup_max=2,
            prompt_lookup_min=1,
            target_model_config=model,
            target_parallel_config=ParallelConfig(),
        )
    for refused in ({"logit_bias": {3: 1.5}}, {"min_p": 0.1}):
        params = SamplingParams(temperature=1.0, **refused)
        with pytest.raises(VLLMValidationError, match="not yet supported with speculative decoding"):
            params.verify(model, spec, None, None)
        params.verify(model, None, None, None)  # accepted without speculation
    ours = {
        "repetition_penalty": 1.5,
        "frequency_penalty": 0.5,
        "presence_penalty": -0.5,
        "allowed_token_ids": [0, 2],
        "min_tokens": 2,
    }
    SamplingParams(temperature=1.0, **ours).verify(model, spec, None, None)


def test_supports_refuses_what_vllm_does_not_implement():
    a = impl("VllmDraftProbs").obj
    assert set(a.sampling_parameters) == set(CASES)
    assert not hasattr(impl("VllmSynthetic").obj, "sampling_parameters")
    assert not hasattr(impl("VllmCpuBonus").obj, "sampling_parameters")
    for c in CASES.values():
        assert a.supports(config_of(c))
    base = config_of(CASES["allowed_token_ids"])
    refused = [
        {"bad_words": [[1]], "bad_words_scope": "prompt_and_generated"},  # vLLM matches the output only
        {"bad_words": [[1]]},  # the default scope is the history
        {"repetition_penalty": 2.0, "repetition_penalty_form": "divide"},  # vLLM: l > 0 ? l / r : l * r
        {"logit_bias": {0: 1.0}},  # refused for a speculative request (_validate_spec_decode)
        {"sequence_bias": {(0, 1): 1.0}},
        {"no_repeat_ngram_size": 2},
        {"frequency_penalty": 2.5},  # vLLM's SamplingParams: within [-2, 2]
        {"repetition_penalty": 0.0},
    ]
    for extra in refused:
        assert not a.supports({**base, **extra}), extra


def test_the_sampling_metadata_is_what_vllms_input_batch_makes():
    """``sampling_metadata`` against ``InputBatch._make_sampling_metadata`` for requests with
    penalties, bad words, allowed tokens and min_tokens (and one without), and the
    ``MinTokensLogitsProcessor`` state against the one InputBatch's update gives it."""
    v = rv.load_vllm()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from vllm.v1.worker.gpu_input_batch import CachedRequestState, InputBatch

    V = 5
    configs = [
        {"repetition_penalty": 1.5, "frequency_penalty": 0.5, "prompt": [1, 2], "generated": [3]},
        {"bad_words": [[1, 2], [4]], "prompt": [0], "generated": [2, 1]},
        {"allowed_token_ids": [0, 3], "presence_penalty": -0.25, "prompt": [4, 4, 4], "generated": []},
        {"min_tokens": 3, "eos_token_id": [1, 4], "prompt": [0], "generated": [2]},
        {"prompt": [3], "generated": [0]},
    ]
    reqs = [rv.batch.request({"vocab_size": V, **c}, 1.0) for c in configs]
    ours = rv.sampling_metadata(reqs, V, [[1, 2], [0], [3, 3], [2], [1]])
    theirs_proc = v.MinTokensLogitsProcessor(None, torch.device("cpu"), False)
    ib = InputBatch(
        max_num_reqs=8,
        max_model_len=16,
        max_num_batched_tokens=64,
        device=torch.device("cpu"),
        vocab_size=V,
        block_sizes=[16],
        max_num_blocks_per_req=[1],
        logitsprocs=v.LogitsProcessors([theirs_proc]),
        num_spec_tokens=2,
    )
    states = []
    for i, r in enumerate(reqs):
        state = CachedRequestState(
            req_id=f"r{i}",
            prompt_token_ids=list(r.prompt),
            mm_features=[],
            sampling_params=r.params,
            generator=None,
            block_ids=([0],),
            num_computed_tokens=0,
            output_token_ids=r.output,
        )
        states.append(state)
        ib.add_request(state)
    for state, spec in zip(states, ours.spec_token_ids):
        ib.update_req_spec_token_ids(state, {state.req_id: spec})
    ib.refresh_metadata()
    theirs = ib.sampling_metadata
    assert theirs.no_penalties == ours.no_penalties is False
    for field in ("frequency_penalties", "presence_penalties", "repetition_penalties", "prompt_token_ids"):
        a, b = getattr(theirs, field), getattr(ours, field)
        assert a.dtype == b.dtype and torch.equal(a, b), (field, a, b)
    assert torch.equal(theirs.allowed_token_ids_mask, ours.allowed_token_ids_mask)
    assert theirs.bad_words_token_ids == ours.bad_words_token_ids == {1: [[1, 2], [4]]}
    assert theirs.output_token_ids == ours.output_token_ids
    assert theirs.spec_token_ids[: len(reqs)] == ours.spec_token_ids
    (mine,) = ours.logitsprocs.non_argmax_invariant
    assert {i: (m, list(o), s) for i, (m, o, s, _) in theirs_proc.min_toks.items()} == {
        i: (m, list(o), s) for i, (m, o, s, _) in mine.min_toks.items()
    }
    assert set(mine.min_toks) == {3} and mine.min_toks[3][2] == {1, 4}


def test_sampler_law_is_vllms_processed_law_on_the_worked_numbers():
    """docs/spec.md section 9's worked numbers through vLLM's own ``Sampler`` processing:
    raw logits (1, -1, 0), prompt (0, 1), repetition_penalty 2 -> (0.5922, 0.0486, 0.3592)."""
    cfg = {"vocab_size": 3, "prompt": [0, 1], "generated": [], "repetition_penalty": 2.0}
    law = impl("VllmDraftProbs").obj.sampler_law([1.0, -1.0, 0.0], cfg, 1.0, [0, 1])
    assert law == pytest.approx([0.5922, 0.0486, 0.3592], abs=1e-4)


@pytest.mark.parametrize("parameter", sorted(CASES))
def test_exact_certification_of_vllm_applying_a_sampling_parameter(parameter):
    from rheo.checks.exact.certify import certify_implementation

    cert = certify_implementation(impl("VllmDraftProbs"), CASES[parameter])
    assert cert.verdict == "lossless", cert.summary()
    assert cert.draws == "concrete"


def test_exact_certification_finds_the_stale_history_control():
    """``VllmStaleHistory`` (no ``spec_token_ids``): the bonus token's repetition penalty
    misses the draft token before it; the same case is lossless with the draft tokens given."""
    from rheo.checks.exact.certify import certify_implementation

    cert = certify_implementation(impl("VllmStaleHistory"), CASES["repetition_penalty"])
    assert cert.verdict == "not lossless", cert.summary()
    assert cert.deviation is not None and cert.deviation > 0.005  # 0.0103 measured


def test_exact_certification_finds_min_tokens_enforced_at_the_bonus_token():
    """min_tokens 1, nothing generated, one draft token: after an accepted draft the bonus
    token may be the eos id (probability 1/3 of the bonus law here), vLLM's bonus sampler
    masks it (``MinTokensLogitsProcessor.apply`` counts the output before the step)."""
    from rheo.checks.exact.certify import certify_implementation

    cert = certify_implementation(impl("VllmDraftProbs"), MIN_TOKENS_BONUS)
    assert cert.verdict == "not lossless", cert.summary()
    assert cert.deviation is not None and cert.deviation > 0.05


def test_the_min_tokens_reproducer_rejects_the_target_law():
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "upstream" / "vllm_min_tokens_bonus.py"), "200"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "     0,2    0.0000  0.1667" in out.stdout, out.stdout
    p = float(out.stdout.split("p = ")[1].split(",")[0])
    assert p < 1e-6, out.stdout
