"""transformers' assisted generation with sampling parameters (docs/spec.md §9,
docs/transformers.md "Sampling parameters"): ``generate`` itself applies
``repetition_penalty``, ``no_repeat_ngram_size``, ``bad_words_ids``, ``sequence_bias`` and
``min_new_tokens`` (with ``eos_token_id``) from the case, on ``input_ids`` = anchor + prompt +
generated + the cycle's tokens; each is certified lossless exactly (every torch draw of the
cycle enumerated), one parameter at a time and two together; ``sampler_law`` (transformers'
processors on the history) is §9's law; ``supports`` refuses the variants transformers does
not implement. Verdicts are transformers 5.24's (other versions skip)."""

from __future__ import annotations

import numpy as np
import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("torch")

if not transformers.__version__.startswith("5.24."):
    pytest.skip(
        f"the verdicts are pinned for transformers 5.24, {transformers.__version__} is installed",
        allow_module_level=True,
    )

from rheo.casefile import load_case  # noqa: E402
from rheo.checks.cases.sampling import with_logits  # noqa: E402
from rheo.checks.exact.check import check_exact  # noqa: E402
from rheo.checks.protocol.inputs import protocol_config  # noqa: E402
from rheo.checks.protocol.load import Implementation, load_implementation  # noqa: E402
from rheo.integrations.transformers_assisted import generators  # noqa: E402
from rheo.reference.generate import hashed_case  # noqa: E402
from rheo.reference.sampling import process_logits  # noqa: E402

MODULE = "rheo.integrations.transformers_assisted"
ALL = sorted(generators.GENERATE_PARAMETERS)


def sampling_case(V: int, seed: int, temperature: str = "1", depth: int = 2, **parameters) -> dict:
    """A chain case (K = 1, policy rheo, m = 0, budget = depth) of float64 arithmetic with
    raw target logits of both signs (``with_logits``: log p + log V of ``hashed_case``'s
    target law; the repetition penalty divides a positive logit and multiplies a negative
    one) and the sampling parameters given (case-file names)."""
    case = hashed_case(V, seed, depth, policy="rheo", K=1, m=0, budget=depth, beam=1, temperature=temperature)
    return {**with_logits(case), **parameters}


# one case per parameter (V = 4, depth 2: every position of the cycle reads a history that the
# drafts of the same cycle changed), and two together
CASES = {
    "repetition_penalty": sampling_case(4, 3, prompt=[0], generated=[1], repetition_penalty=1.5),
    "no_repeat_ngram_size": sampling_case(4, 5, prompt=[0, 1, 0], generated=[2], no_repeat_ngram_size=2),
    "bad_words": sampling_case(4, 7, prompt=[3], generated=[0], bad_words=[[2], [0, 1], [1, 0, 3]]),
    "min_tokens": sampling_case(4, 9, prompt=[1], generated=[2], min_tokens=3, eos_token_id=[0]),
    "sequence_bias": sampling_case(
        4, 11, prompt=[2], generated=[], sequence_bias={"1": 0.75, "0,2": -1.25, "3,3": 2.0}
    ),
    "repetition_penalty+no_repeat_ngram_size": sampling_case(
        4, 13, prompt=[0, 1], generated=[0], repetition_penalty=2.0, no_repeat_ngram_size=2
    ),
    "bad_words+min_tokens": sampling_case(
        4, 15, prompt=[2], generated=[1], bad_words=[[3, 1], [2]], min_tokens=2, eos_token_id=[1]
    ),
}

_LOADED: dict[str, Implementation] = {}


def impl(name: str) -> Implementation:
    """The adapter as ``rheo gate --impl`` loads it; one per test session (its models are built once)."""
    if name not in _LOADED:
        _LOADED[name] = load_implementation(f"{MODULE}:{name}")
    return _LOADED[name]


@pytest.mark.parametrize("name", list(CASES))
def test_assisted_generation_applies_each_sampling_parameter_losslessly(name):
    """One real ``generate(assistant_model=...)`` cycle per run, every torch draw enumerated;
    the parameters act at each verified position with the drafts before it in the history."""
    out = check_exact(impl("AssistedCandidateGenerator"), [CASES[name]])
    assert out.verdict == "pass" and "lossless (exact) on 1 cases" in out.detail, out.detail


def test_early_exit_applies_the_sampling_parameters_losslessly():
    out = check_exact(impl("EarlyExitCandidateGenerator"), [CASES["repetition_penalty+no_repeat_ngram_size"]])
    assert out.verdict == "pass" and "lossless (exact) on 1 cases" in out.detail, out.detail


def test_sampler_law_is_the_specification_s_processed_law():
    """transformers' processors on prompt + generated + path give docs/spec.md §9's law (to
    float32 rounding), at every position of every case above."""
    adapter = impl("AssistedCandidateGenerator").obj
    for name, case in CASES.items():
        inst = load_case(case)
        config = protocol_config(inst)
        sampling = inst.config.sampling
        for key, row in case["target_logits"].items():
            path = tuple(int(t) for t in key.split(",")) if key else ()
            logits = np.array([float(x) for x in row])
            history = [*config["prompt"], *config["generated"], *path]
            got = adapter.sampler_law(logits, config, 1.0, history)
            processed = np.array(process_logits(list(logits), sampling, path))
            expected = np.exp(processed - processed.max())
            assert got == pytest.approx(expected / expected.sum(), abs=1e-6), (name, key)


def test_supports_refuses_the_variants_and_parameters_transformers_does_not_take():
    config = protocol_config(load_case(CASES["repetition_penalty"]))
    adapter = impl("AssistedCandidateGenerator").obj
    assert adapter.supports(config) and set(adapter.sampling_parameters) == set(ALL)
    assert not adapter.supports({**config, "repetition_penalty_form": "divide"})
    bad = protocol_config(load_case(CASES["bad_words"]))
    assert adapter.supports(bad) and not adapter.supports({**bad, "bad_words_scope": "generated"})
    for other in ("frequency_penalty", "presence_penalty"):
        assert not adapter.supports({**config, other: 0.5}), other
    assert not adapter.supports({**config, "logit_bias": {1: 0.5}})
    assert not adapter.supports({**config, "allowed_token_ids": [0, 1]})
    # a one-token bad word that is an end-of-sequence id: transformers drops it once eos is set
    eos = protocol_config(load_case(CASES["bad_words+min_tokens"]))
    assert adapter.supports(eos) and not adapter.supports({**eos, "bad_words": [[1]]})
    # prompt lookup drafts from the case's history and the verifier alone reads it; the
    # prefill-first adapters (their prefill writes the anchor into the history) and the
    # different-tokenizer ones take no sampling parameter
    for name in ("PromptLookupCandidateGenerator", "EarlyExitCandidateGenerator", "SpeculativeSampling"):
        assert impl(name).obj.supports(config), name
    for name in (
        "MTPCandidateGenerator",
        "DFlashTokenCandidateGenerator",
        "SinglePositionMultiTokenCandidateGenerator",
        "UniversalSpeculativeDecodingPermuted",
    ):
        assert not impl(name).obj.supports(config), name
    whole = load_implementation(f"{MODULE}.generations:AssistedGeneration").obj
    assert "min_tokens" not in whole.sampling_parameters  # its eos_token_id would end a generation early
    assert whole.supports({**config, "n_tokens": 3})


class WithoutHistory(generators.AssistedCandidateGenerator):
    """A planted bug: ``generate`` is given the parameters but not the history (its prompt is
    the anchor alone, where the case has a prompt and generated tokens); ``sampler_law``
    still reads the whole history, as the request defines it."""

    def prompt(self, tables, L, context=None):
        return super().prompt(tables, L, () if context is not None else None)

    def supports(self, config: dict) -> bool:
        return super().supports(config) and bool(generators.context_of(config))


@pytest.mark.parametrize("name", ["repetition_penalty", "no_repeat_ngram_size"])
def test_the_check_sees_a_history_left_out(name):
    """The check is not blind to the history: without prompt + generated in input_ids, the
    same transformers code is not lossless against the request's law."""
    out = check_exact(Implementation(WithoutHistory(), "without-history"), [CASES[name]])
    assert out.verdict == "fail" and "not lossless" in out.detail, out.detail


@pytest.mark.parametrize("name", ["bad_words", "repetition_penalty"])
def test_a_whole_generation_applies_the_parameters_across_cycles_losslessly(name):
    """Several cycles in one ``generate(assistant_model=...)``: each cycle's positions read
    the tokens of the cycles before it (n = 3, L = 2). The repetition penalty reads the
    raw logits' signs, so it also shows that generations are given the case's raw logits."""
    from rheo.checks.exact.generation import certify_generation

    whole = load_implementation(f"{MODULE}.generations:AssistedGeneration")
    cert = certify_generation(whole, {**CASES[name], "n_tokens": 3})
    assert cert.verdict == "lossless" and cert.deviation < 1e-6, cert.summary()
