"""transformers' own assisted generation through the gate (rheo.integrations.transformers_assisted,
docs/transformers.md): every candidate generator transformers ships has an adapter; each
adapter's verdict is pinned, computed by the gate's own checks (exact certification, which
follows transformers' torch draws, and the output law); the two defects found are pinned
with their minimal counterexamples, and with the change that makes each go away; the
adapters' ``sampler_law`` is transformers' processors; ``supports`` refuses what they do not
implement. Verdicts are transformers 5.24's (other versions skip)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("torch")

if not transformers.__version__.startswith("5.24."):
    pytest.skip(
        f"the verdicts are pinned for transformers 5.24, {transformers.__version__} is installed",
        allow_module_level=True,
    )

import torch  # noqa: E402
from transformers.generation import candidate_generator  # noqa: E402
from transformers.generation.logits_process import (  # noqa: E402
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

import rheo.integrations.transformers_assisted as ta  # noqa: E402
from rheo.casefile import load_case  # noqa: E402
from rheo.checks.exact.certify import certify_implementation  # noqa: E402
from rheo.checks.exact.check import check_exact  # noqa: E402
from rheo.checks.protocol.inputs import draft_logits_fn, protocol_config, target_logits_fn  # noqa: E402
from rheo.checks.protocol.load import Implementation, load_implementation  # noqa: E402
from rheo.checks.statistics.output_law import check_output_law  # noqa: E402
from rheo.integrations.transformers_assisted import generators  # noqa: E402
from rheo.reference.generate import hashed_case  # noqa: E402

MODULE = "rheo.integrations.transformers_assisted"
LOSSLESS_CYCLES = [
    "AssistedCandidateGenerator",
    "EarlyExitCandidateGenerator",
    "PromptLookupCandidateGenerator",
    "MTPCandidateGenerator",
    "DFlashTokenCandidateGenerator",
]
# a chain of depth 2 at T = 1/2 with top-p, and a greedy one (exact arithmetic: T = 1/k or 0)
CHAIN = {**hashed_case(3, 3, 2, policy="rheo", K=1, m=0, budget=2, beam=1, temperature="1/2", target_top_p="9/10")}
CHAIN_MIN_P = hashed_case(3, 5, 2, policy="rheo", K=1, m=0, budget=2, beam=1, temperature="1", target_min_p="1/5")
GREEDY = hashed_case(3, 1, 2, policy="rheo", K=1, m=0, budget=2, beam=1, temperature="0")
TREE = hashed_case(3, 1, 2, policy="rheo", K=2, m=1, budget=3, beam=2, temperature="1/2")

_LOADED: dict[str, Implementation] = {}


def impl(name: str) -> Implementation:
    """The adapter as ``rheo gate --impl`` loads it; one per test session (its models are built once)."""
    if name not in _LOADED:
        _LOADED[name] = load_implementation(f"{MODULE}:{name}")
    return _LOADED[name]


def test_every_candidate_generator_transformers_ships_has_an_adapter_named_like_it():
    shipped = {
        name
        for name, obj in vars(candidate_generator).items()
        if isinstance(obj, type)
        and issubclass(obj, candidate_generator.CandidateGenerator)
        and obj is not candidate_generator.CandidateGenerator
    }
    assert len(shipped) == 8, sorted(shipped)
    for name in shipped:
        assert impl(name).runs_cycles and not impl(name).follows_uniforms, name


def test_speculative_sampling_is_lossless_exactly():
    out = check_exact(impl("SpeculativeSampling"), [CHAIN, CHAIN_MIN_P])
    assert out.verdict == "pass" and "lossless (exact) on 2 cases" in out.detail, out.detail


@pytest.mark.parametrize("name", LOSSLESS_CYCLES)
def test_a_generator_that_drafts_from_the_law_it_reports_is_lossless_exactly(name):
    """Each cycle is one real ``generate``; every torch draw in it (the assistant's
    ``multinomial``, ``_speculative_sampling``'s ``rand_like``) is enumerated exactly."""
    out = check_exact(impl(name), [CHAIN, GREEDY])
    assert out.verdict == "pass" and "lossless (exact) on 2 cases" in out.detail, out.detail


def test_universal_assisted_generation_is_greedy_only_and_lossless_there():
    uag = impl("AssistedCandidateGeneratorDifferentTokenizers")
    out = check_exact(uag, [GREEDY, CHAIN])
    assert out.verdict == "pass" and "lossless (exact) on 1 cases" in out.detail, out.detail
    assert out.data["unsupported_configurations"] == 1


# the shrunk counterexample of ``rheo gate --impl ...:SinglePositionMultiTokenCandidateGenerator``
GREEDY_DRAFT_CASE = {
    "vocab_size": 2,
    "policy": "rheo",
    "K": 1,
    "m": 0,
    "depth": 1,
    "budget": 1,
    "beam": 1,
    "temperature": "1/3",
    "target": {"": ["1/2", "1/2"], "0": ["1/2", "1/2"], "1": ["1/2", "1/2"]},
    "draft": {"": ["1/3", "2/3"]},
}


def test_the_gemma4_assistant_path_drafts_greedily_yet_verifies_against_softmax_and_is_not_lossless():
    """``SinglePositionMultiTokenCandidateGenerator`` drafts the argmax (token 1) and hands
    its raw logits to ``_speculative_sampling`` as if token 1 had been drawn from
    q = (1/3, 2/3): accepted with p/q = 3/4, so the first token is 1 with probability 3/4,
    not 1/2 (transformers#32867's defect, in the Gemma-4 path)."""
    cert = certify_implementation(impl("SinglePositionMultiTokenCandidateGenerator"), GREEDY_DRAFT_CASE)
    assert cert.verdict == "not lossless" and cert.deviation == pytest.approx(0.125, abs=1e-6), cert.summary()
    assert cert.law == pytest.approx({(0,): 0.25, (1, 0): 0.375, (1, 1): 0.375}, abs=1e-6)
    # greedy decoding (T = 0) is that path's own case: lossless
    assert certify_implementation(impl("SinglePositionMultiTokenCandidateGenerator"), GREEDY).verdict == "lossless"


class IdOrderedVocabulary(ta.UniversalSpeculativeDecodingPermuted):
    """The same adapter with tokenizers whose ``get_vocab()`` lists words in id order."""

    def build(self, V, L, state):
        built = super().build(V, L, state)
        for key in ("tokenizer", "assistant_tokenizer"):
            built.generate_kwargs[key] = IdOrdered(tokenizer_object=built.generate_kwargs[key]._tokenizer)
        return built


class IdOrdered(transformers.PreTrainedTokenizerFast):
    def get_vocab(self):
        return dict(sorted(super().get_vocab().items(), key=lambda item: item[1]))


# the shrunk counterexample of ``rheo gate --impl ...:UniversalSpeculativeDecodingPermuted``
MISPLACED_CASE = {
    "vocab_size": 4,
    "policy": "rheo",
    "K": 1,
    "m": 0,
    "depth": 1,
    "budget": 1,
    "beam": 1,
    "temperature": "1/3",
    "target": {"": ["0", "0", "1/2", "1/2"], "*": ["0", "0", "1/2", "1/2"]},
    "draft": {"": ["0", "0", "0", "1"]},
}


def test_universal_speculative_decoding_misplaces_the_pruned_assistant_logits_and_is_not_lossless():
    """``AssistantToTargetTranslator`` prunes the assistant's head to the shared words in
    ``get_vocab()`` order, but ``get_target_logits`` places the pruned logits in id order:
    here the draft's certain token 3 gets q = 0 (its mass lands on token 0), so it is always
    accepted and token 2 (p = 1/2) is never emitted. With tokenizers that list their words in
    id order the same code is lossless."""
    assert [a for a in ta.vocab_permutation(6) if a <= 4] == [2, 0, 3, 1, 4]  # the seeded order, not id order
    cert = certify_implementation(impl("UniversalSpeculativeDecodingPermuted"), MISPLACED_CASE)
    assert cert.verdict == "not lossless" and cert.deviation == pytest.approx(0.25, abs=1e-6), cert.summary()
    assert cert.law == pytest.approx({(3, 2): 0.5, (3, 3): 0.5}, abs=1e-6)
    for case in (MISPLACED_CASE, CHAIN_MIN_P):
        fixed = certify_implementation(Implementation(IdOrderedVocabulary(), "id-ordered"), case)
        assert fixed.verdict == "lossless", fixed.summary()


def misplaced_witness(V: int, order: list[int]) -> dict | None:
    """A case that is lossy under ``order`` (the assistant ids of the shared words in the
    pruned head's row order), None if ``order`` is id order: the draft is certain of a table
    token x whose row k (its assistant id) holds another word's logits, so x is reported
    q = 0 and always accepted, while the target gives it 1/2."""
    ids = ta.usd_words(V)[2]
    wrong = [k for k, a in enumerate(order) if a != k and ids[k] < V]  # a misplaced row of a non-anchor word
    if not wrong:
        return None
    x, y = int(ids[wrong[0]]), int(ids[wrong[0]]) ^ 1
    target = ["1/2" if t in (x, y) else "0" for t in range(V)]
    draft = ["1" if t == x else "0" for t in range(V)]
    return {**MISPLACED_CASE, "vocab_size": V, "target": {"": target, "*": target}, "draft": {"": draft}}


@pytest.mark.parametrize("V", [2, 4])
def test_usd_with_real_tokenizers_is_lossless_iff_get_vocab_listed_the_shared_words_in_id_order(V):
    """``UniversalSpeculativeDecodingGenerator``'s tokenizers are real fast tokenizers
    (saved, loaded by ``AutoTokenizer``), whose ``get_vocab()`` order changes from call to
    call: its verdict is not pinned, it is checked against the order transformers saw. Each
    fresh build (a new pair of tokenizers, a new translator) is certified exactly on a chain
    case and on the case that order makes lossy; id order must certify lossless on both."""
    seen = set()
    for _ in range(6 if V == 2 else 2):
        adapter = ta.UniversalSpeculativeDecodingGenerator()
        case = hashed_case(V, 5, 1, policy="rheo", K=1, m=0, budget=1, beam=1, temperature="1", target_min_p="1/5")
        first = certify_implementation(Implementation(adapter, "usd"), case)
        order = adapter.shared_order(V, 1)
        assert order is not None and sorted(order) == list(range(V + 1)), order  # every shared word, "extra" pruned
        witness = misplaced_witness(V, order)
        in_id_order = order == sorted(order)
        assert (witness is None) == in_id_order
        seen.add(in_id_order)
        if in_id_order:
            assert first.verdict == "lossless", (order, first.summary())
            other = MISPLACED_CASE if V == 4 else GREEDY_DRAFT_CASE
            assert certify_implementation(Implementation(adapter, "usd"), other).verdict == "lossless"
        else:
            cert = certify_implementation(Implementation(adapter, "usd"), witness)
            lossy = cert.verdict == "not lossless" and cert.deviation == pytest.approx(0.25, abs=1e-6)
            assert lossy, (order, cert.summary())
            assert adapter.shared_order(V, 1) == order  # one translator per build: the order it saw stays
    print(f"V = {V}: id order seen: {sorted(seen)}")


def test_universal_speculative_decoding_crashes_when_the_assistant_vocabulary_is_inside_the_targets():
    """A known failure, pinned (it fails loudly once transformers fixes it): with no
    assistant-only word nothing is pruned, yet ``get_target_ids`` reads the pruning's
    ``assistant_overlap_token_ids`` (the Qwen2.5-7B + 0.5B case: one tokenizer, a padded
    target vocabulary)."""

    class SubsetVocabulary(ta.UniversalSpeculativeDecodingGenerator):
        def build(self, V, L, state):
            words = [f"w{t}" for t in range(V)] + ["anchor"]
            ids = np.arange(V, -1, -1)
            main = ta.TableLM(ta.TableConfig(vocab_size=V + 2), state)  # one padding slot
            assistant = ta.TableLinearHeadLM(ta.TableConfig(vocab_size=V + 1, layer_tables=("draft",)), state, ids)
            generators._assistant_config(assistant, L)
            tokenizers = {
                "tokenizer": generators._tokenizer(words),
                "assistant_tokenizer": generators._tokenizer([words[t] for t in ids]),
            }
            return ta.Built(state, main, {"assistant_model": assistant, **tokenizers})

    inst = load_case(CHAIN)
    with pytest.raises(AttributeError, match="assistant_overlap_token_ids"):
        SubsetVocabulary().cycle(draft_logits_fn(inst), target_logits_fn(inst), protocol_config(inst), 0.5)


def test_the_output_law_passes_a_lossless_generator_and_rejects_the_greedy_drafter():
    assert check_output_law(impl("AssistedCandidateGenerator"), 1000, level="smoke").passed
    out = check_output_law(impl("SinglePositionMultiTokenCandidateGenerator"), 2000, level="smoke")
    assert not out.passed and "not lossless" in out.detail, out.detail


def test_the_assistant_drafts_with_the_warpers_applied_twice(monkeypatch):
    """An efficiency defect, not a loss: ``AssistedCandidateGenerator`` gives the assistant's
    ``generate`` the main model's processors (temperature included) and its generation
    config, from which ``generate`` adds the warpers again: at T = 1/2 the assistant drafts
    from softmax(logits / (1/4)), and reports that law, so verification stays exact."""
    import transformers.generation.utils as generation_utils

    seen = []
    original = generation_utils._speculative_sampling

    def spy(candidate_input_ids, candidate_logits, *args, **kwargs):
        seen.append(candidate_logits.softmax(-1)[0, 0, :3].double().numpy())
        return original(candidate_input_ids, candidate_logits, *args, **kwargs)

    monkeypatch.setattr(generation_utils, "_speculative_sampling", spy)
    inst = load_case({**CHAIN, "target_top_p": None})
    draft = draft_logits_fn(inst)
    impl("AssistedCandidateGenerator").obj.cycle(draft, target_logits_fn(inst), protocol_config(inst), 0.5)
    root = draft([()])[0]
    twice = np.exp(root / 0.25 - np.max(root / 0.25))
    assert seen[0] == pytest.approx(twice / twice.sum(), abs=1e-6)


def test_prompt_lookup_with_top_p_never_proposes_the_tokens_top_p_sorts_first():
    """Efficiency, not a loss: prompt lookup checks its candidates against the processors
    run on constant fake logits, where top-p removes the tokens ``torch.sort`` puts first (up
    to mass 1 - top_p): with V = 4 and top-p 3/4, token 0 is never proposed."""
    from transformers.generation.logits_process import LogitsProcessorList

    lookup = candidate_generator.PromptLookupCandidateGenerator(
        num_output_tokens=2, max_length=20, logits_processor=LogitsProcessorList([TopPLogitsWarper(0.75)]), vocab_size=4
    )
    assert lookup.get_candidates(torch.tensor([[3, 1, 2, 3]]))[0][0, 4:].tolist() == [1, 2]
    assert lookup.get_candidates(torch.tensor([[3, 1, 0, 3]]))[0][0, 4:].tolist() == [1]  # cut before token 0
    assert lookup.get_candidates(torch.tensor([[3, 0, 1, 3]]))[0].shape[1] == 4  # no candidate at all


def transformers_law(logits, temperature, top_k=None, top_p=None, min_p=None):
    """softmax after transformers' warpers, in ``_get_logits_processor``'s order."""
    scores = torch.as_tensor(np.asarray(logits)[None], dtype=torch.float32)
    ids = torch.zeros(1, 1, dtype=torch.long)
    warpers = [TemperatureLogitsWarper(temperature)] if temperature != 1 else []
    warpers += [TopKLogitsWarper(top_k)] if top_k else []
    warpers += [TopPLogitsWarper(top_p)] if top_p is not None else []
    warpers += [MinPLogitsWarper(min_p)] if min_p is not None else []
    for warper in warpers:
        scores = warper(ids, scores)
    return scores.softmax(-1)[0].double().numpy()


@pytest.mark.parametrize(
    "logits, temperature, filters",
    [
        (np.log([0.4, 0.2, 0.2, 0.2]), 1.0, {"target_top_k": 2}),  # ties at the 2nd place: all kept
        (np.log([0.5, 0.3, 0.15, 0.05]), 0.5, {"target_top_p": 0.75}),
        (np.log([0.5, 0.3, 0.15, 0.05]), 1.5, {"target_min_p": 0.2}),
        (np.array([0.0, -np.inf, 1.0, 2.0]), 1 / 3, {"target_top_k": 3, "target_top_p": 0.9, "target_min_p": 0.1}),
    ],
)
def test_sampler_law_is_the_law_of_transformers_processors(logits, temperature, filters):
    config = {"target_top_k": None, "target_top_p": None, "target_min_p": None, **filters}
    expected = transformers_law(
        logits, temperature, filters.get("target_top_k"), filters.get("target_top_p"), filters.get("target_min_p")
    )
    for name in ("SpeculativeSampling", "AssistedCandidateGenerator"):
        got = impl(name).obj.sampler_law(logits, config, temperature)
        assert got == pytest.approx(expected, abs=1e-7), name


def test_sampler_law_at_temperature_zero_is_the_argmax_lowest_id_on_ties():
    law = impl("AssistedCandidateGenerator").obj.sampler_law(np.log([0.2, 0.4, 0.4]), {}, 0.0)
    assert law.tolist() == [0.0, 1.0, 0.0]


def test_supports_refuses_what_is_not_implemented():
    config = {**protocol_config(load_case(CHAIN))}
    tree = protocol_config(load_case(TREE))
    usd = ["UniversalSpeculativeDecodingGenerator", "UniversalSpeculativeDecodingPermuted"]
    for name in ["SpeculativeSampling", *usd, *LOSSLESS_CYCLES]:
        adapter = impl(name).obj
        assert adapter.supports(config) and not adapter.supports(tree), name
        assert not adapter.supports({**config, "policy": "topk"}) and not adapter.supports({**config, "m": 1})
        if name != "SpeculativeSampling":  # the models' codes would pass 2^53
            assert not adapter.supports({**config, "vocab_size": 10**5}), name
    for name in ("SpeculativeSampling", *usd):  # sampling only
        assert not impl(name).obj.supports({**config, "temperature": 0.0}), name
    uag = impl("AssistedCandidateGeneratorDifferentTokenizers").obj
    assert uag.supports({**config, "temperature": 0.0}) and not uag.supports(config)  # greedy only
    with pytest.raises(NotImplementedError):
        impl("AssistedCandidateGenerator").obj.cycle(None, None, tree, 0.5)


# ---- whole generations (transformers_assisted.generations): many cycles in one generate ----

GENERATIONS = "rheo.integrations.transformers_assisted.generations"


def threshold_case(n: int = 8) -> dict:
    """A generation that reaches transformers' update of the assistant's confidence
    threshold (more than 5 judged drafts, a match and a miss) in few runs: the draft always
    proposes token 0 (probability 1) but at the prefixes of length n - 2 (3/4, 1/4); the
    target is a coin at the root, refuses token 0 after two tokens, and takes it elsewhere."""
    target = {"*": ["1", "0"], "": ["1/2", "1/2"], **{f"{a},{b}": ["0", "1"] for a in range(2) for b in range(2)}}
    draft = {"*": ["1", "0"]}
    draft.update({",".join(map(str, p)): ["3/4", "1/4"] for p in itertools.product(range(2), repeat=n - 2)})
    return {"name": "threshold", "vocab_size": 2, "policy": "rheo", "K": 1, "m": 0, "depth": 2, "budget": 2,
            "beam": 1, "temperature": "1", "n_tokens": n, "target": target, "draft": draft}  # fmt: skip


def test_whole_generation_adapters_are_generate_only_and_listed_with_the_generation_checks():
    from rheo.checks.gate.checklist import impl_checks

    impl = load_implementation(f"{GENERATIONS}:AssistedGeneration")
    assert impl.runs_generations and not impl.runs_cycles and impl.provides() == "whole generations"
    assert [c.name for c in impl_checks(impl)] == [
        "impl: exact certification, whole generations (whole generations)",
        "impl: output law, whole generations (whole generations)",
    ]
    config = {**protocol_config(load_case(TREE)), "n_tokens": 3}
    assert not impl.obj.supports(config)  # chains only
    chain = {**protocol_config(load_case(CHAIN)), "n_tokens": 3}
    assert impl.obj.supports(chain) and not impl.obj.supports({**chain, "n_tokens": 40})  # codes past 2^53


@pytest.mark.parametrize("name", ["AssistedGeneration", "AssistedGenerationHeuristic"])
def test_whole_generations_of_assisted_decoding_are_lossless_exactly(name, monkeypatch):
    """Several cycles in one ``generate``: the assistant's cache cropped to the accepted
    prefix after a rejection, and (heuristic schedule) the draft length moving between
    cycles; the law of the n tokens is still the target's."""
    from transformers.cache_utils import DynamicLayer

    from rheo.checks.cases.generations import GENERATION_CASES, generation_case
    from rheo.checks.exact.generation import certify_generation

    crops, lengths = [], []
    crop = DynamicLayer.crop
    monkeypatch.setattr(DynamicLayer, "crop", lambda self, k: (crops.append(k), crop(self, k))[1])
    update = candidate_generator.AssistedCandidateGenerator.update_candidate_strategy

    def spy(self, *args):
        update(self, *args)
        lengths.append(self.num_assistant_tokens)

    monkeypatch.setattr(candidate_generator.AssistedCandidateGenerator, "update_candidate_strategy", spy)
    case = generation_case(*GENERATION_CASES["quick"][2])  # n = 3, V = 3, L = 2, T = 1/2, top-k 2
    cert = certify_generation(load_implementation(f"{GENERATIONS}:{name}"), case)
    assert cert.verdict == "lossless" and cert.deviation < 1e-6, cert.summary()
    assert any(k < 0 for k in crops)  # a cache cropped by the tokens a cycle rejected
    assert set(lengths) == {2} if name == "AssistedGeneration" else len(set(lengths)) > 1  # heuristic: +2 / -1


def test_the_confidence_threshold_update_runs_and_the_generation_stays_lossless(monkeypatch):
    """transformers updates ``assistant_confidence_threshold`` with scikit-learn's
    ``roc_curve`` (installed: the ``test`` extra) once more than 5 drafts were judged and
    both a match and a miss were seen; the case reaches it and the threshold moves."""
    pytest.importorskip("sklearn")
    from rheo.checks.exact.generation import certify_generation

    seen = []
    update = candidate_generator.AssistedCandidateGenerator.update_candidate_strategy

    def spy(self, *args):
        before = self.assistant_generation_config.assistant_confidence_threshold
        update(self, *args)
        seen.append((before, float(self.assistant_generation_config.assistant_confidence_threshold)))

    monkeypatch.setattr(candidate_generator.AssistedCandidateGenerator, "update_candidate_strategy", spy)
    cert = certify_generation(load_implementation(f"{GENERATIONS}:AssistedGeneration"), threshold_case())
    assert cert.verdict == "lossless" and cert.deviation < 1e-6, cert.summary()
    assert seen[0][0] == 0.4 and any(after != before for before, after in seen)


def test_the_gemma4_assistant_path_is_not_lossless_over_whole_generations_either():
    """The first defect (docs/transformers.md) seen by the generation check: greedy drafts
    verified as if sampled move the n-token law."""
    from rheo.checks.cases.generations import generation_cases
    from rheo.checks.exact.generation import certify_generation

    case = generation_cases("smoke")[0]  # n = 4, V = 2, a chain of 2, T = 1
    cert = certify_generation(load_implementation(f"{GENERATIONS}:SinglePositionMultiTokenGeneration"), case)
    assert cert.verdict == "not lossless" and cert.deviation > 0.05, cert.summary()


def test_mtp_over_several_cycles_crashes_after_a_one_token_prompt():
    """transformers' MTP cache correction after a cycle that rejects the first of L >= 2
    drafts slices fewer hidden states than input tokens when the prompt is one token
    (docs/transformers.md, "Whole generations"); ``MTPGeneration`` prompts with two."""
    from rheo.checks.cases.generations import generation_cases
    from rheo.checks.protocol.generation import call_generate
    from rheo.checks.protocol.inputs import law_instance

    inst = law_instance(generation_cases("smoke")[0])  # n = 4, V = 2, L = 2, T = 1
    one, two = (load_implementation(f"{GENERATIONS}:{c}") for c in ("MtpOnePromptToken", "MTPGeneration"))
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        for seed in range(30):
            torch.manual_seed(seed)
            call_generate(one, inst, 4)
    for seed in range(30):
        torch.manual_seed(seed)
        assert len(call_generate(two, inst, 4)) == 4
