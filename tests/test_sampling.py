"""Sampling parameters (docs/spec.md §9): each processing step on hand-computed numbers, the
spec's worked numbers read from docs/spec.md, case files with raw logits, the processed
target law along a path, the protocol's opt-in, and the reference lossless with them."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from rheo.casefile import load_case
from rheo.checks.cases.sampling import masked_prefix, sampling_configs, sampling_names
from rheo.checks.cases.space import select
from rheo.checks.protocol.inputs import case_config, raw_logits
from rheo.checks.protocol.load import Implementation, ImplLoadError, load_implementation
from rheo.reference import certify
from rheo.reference.numbers import CaseError
from rheo.reference.params import Params
from rheo.reference.sampling import PARAMETERS, SamplingParameters, history, process_logits, softmax

NEG = -math.inf
SPEC = Path(__file__).resolve().parents[1] / "docs" / "spec.md"


def test_the_spec_worked_numbers():
    text = SPEC.read_text(encoding="utf-8")
    sign, divide = re.findall(r"p = (?:softmax\(l'\) = )?\(([0-9., ]+)\)", text.split("## 9.")[1])[:2]
    s = SamplingParameters(prompt=(0, 1), repetition_penalty=2.0)
    for form, printed in (("sign", sign), ("divide", divide)):
        law = softmax(process_logits([1.0, -1.0, 0.0], s.replace(repetition_penalty_form=form), ()))
        assert [round(x, 4) for x in law] == [float(x) for x in printed.split(",")], form


def params(**kw) -> SamplingParameters:
    return SamplingParameters(**kw)


STEPS = [  # (parameters, path, raw logits, processed logits by hand)
    (params(allowed_token_ids=(0, 2)), (), [1.0, 2.0, 3.0], [1.0, NEG, 3.0]),
    (params(bad_words=((1,),)), (), [1.0, 2.0, 3.0], [1.0, NEG, 3.0]),
    (params(bad_words=((2, 0),)), (2,), [1.0, 2.0, 3.0], [NEG, 2.0, 3.0]),  # across the drafted 2
    (params(bad_words=((2, 0),)), (1,), [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]),
    (params(prompt=(1,), bad_words=((1, 0),)), (), [1.0, 2.0, 3.0], [NEG, 2.0, 3.0]),
    (params(prompt=(1,), bad_words=((1, 0),), bad_words_scope="generated"), (), [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]),
    (params(prompt=(0, 1, 0), no_repeat_ngram_size=2), (), [1.0, 2.0, 3.0], [1.0, NEG, 3.0]),
    (params(prompt=(0, 1), no_repeat_ngram_size=3), (), [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]),
    (params(prompt=(2,), no_repeat_ngram_size=1), (0,), [1.0, 2.0, 3.0], [NEG, 2.0, NEG]),
    (params(generated=(1,), min_tokens=3, eos_token_id=(2,)), (0,), [1.0, 2.0, 3.0], [1.0, 2.0, NEG]),
    (params(generated=(1,), min_tokens=2, eos_token_id=(2,)), (0,), [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]),
    (params(logit_bias=((0, 0.5), (2, -1.0))), (), [1.0, 2.0, 3.0], [1.5, 2.0, 2.0]),
    (params(sequence_bias=(((1, 2), 2.0), ((0,), -1.0))), (1,), [1.0, 2.0, 3.0], [0.0, 2.0, 5.0]),
    (params(sequence_bias=(((1, 2), 2.0),)), (0,), [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]),
    (params(prompt=(0,), repetition_penalty=2.0), (1,), [-1.0, 2.0, 3.0], [-2.0, 1.0, 3.0]),
    (params(prompt=(0,), repetition_penalty=2.0, repetition_penalty_form="divide"), (), [-1.0, 2.0], [-0.5, 2.0]),
    (params(generated=(1, 1), frequency_penalty=0.5), (2,), [1.0, 2.0, 3.0], [1.0, 1.0, 2.5]),
    (params(prompt=(0,), generated=(1, 1), presence_penalty=0.5), (), [1.0, 2.0, 3.0], [1.0, 1.5, 3.0]),
    # the order: the bias (step 5) before the repetition penalty (6) before frequency (7)
    (params(prompt=(0,), logit_bias=((0, 2.0),), repetition_penalty=2.0), (), [-1.0, 0.0], [0.5, 0.0]),
    (params(generated=(0,), repetition_penalty=2.0, frequency_penalty=1.0), (), [4.0, 0.0], [1.0, 0.0]),
]


@pytest.mark.parametrize("s,path,raw,want", STEPS)
def test_each_step_by_hand(s, path, raw, want):
    assert process_logits(raw, s, path) == want


def test_history_is_prompt_then_generated_then_path():
    s = params(prompt=(3,), generated=(1,), presence_penalty=1.0)
    assert history(s, (0, 2)) == (3, 1, 0, 2)


def case(**kw):
    base = {
        "vocab_size": 3,
        "target_logits": {"*": [1, -1, "-inf"], "": [1, -1, 0]},
        "draft": {"*": ["1/2", "3/10", "1/5"]},
        "policy": "rheo",
        "K": 2,
        "m": 1,
        "depth": 2,
        "budget": 3,
        "arithmetic": "float64",
    }
    base.update(kw)
    return {k: v for k, v in base.items() if v is not None}


def test_the_target_law_is_processed_along_each_path():
    inst = load_case(case(prompt=[0], repetition_penalty=2, target_logits={"*": [1, -1, 0]}))
    assert inst.target_law(()) == softmax([0.5, -1.0, 0.0])
    assert inst.target_law((1,)) == softmax([0.5, -2.0, 0.0])  # the drafted 1 is now in the history
    assert inst.target_law((2, 1)) == softmax([0.5, -2.0, 0.0])  # 2's logit 0 stays 0
    assert list(raw_logits(inst, (1,))) == [1.0, -1.0, 0.0]  # an implementation gets the raw logits
    assert inst.target_law((0,))[2] == softmax([0.5, -1.0, 0.0])[2]


def test_raw_logits_cases_read_minus_infinity_and_are_certified_lossless():
    inst = load_case(case(min_tokens=2, eos_token_id=0, bad_words=[[1, 0]]))
    assert inst.target_law((1,)) == (0.0, 1.0, 0.0)  # 0: eos held back and banned after 1; 2: logit -inf
    assert inst.target_law(()) == softmax([NEG, -1.0, 0.0])
    assert certify(inst).lossless


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"arithmetic": "exact"}, "target_logits"),
        ({"target": {"*": ["1/3", "1/3", "1/3"]}}, "target_logits"),
        ({"target_logits": {"*": [1, "nan", 0]}}, 'target_logits["*"][1]'),
        ({"target_logits": {"*": [1, 0]}}, 'target_logits["*"]'),
        ({"target_logits": {"*": ["-inf", "-inf", "-inf"]}}, 'target_logits["*"]'),
        ({"bad_words": [[1, 7]]}, "bad_words[0]"),
        ({"min_tokens": 2}, "eos_token_id"),
        ({"repetition_penalty": 0}, "repetition_penalty"),
        ({"repetition_penalty_form": "log"}, "repetition_penalty_form"),
        ({"logit_bias": {"x": 1}}, "logit_bias"),
        ({"no_repeat_ngram_size": 0}, "no_repeat_ngram_size"),
    ],
)
def test_bad_sampling_input_names_the_field(changes, field):
    with pytest.raises(CaseError) as err:
        load_case(case(**changes))
    assert err.value.field == field, str(err.value)


def test_every_token_masked_is_refused_with_its_prefix():
    c = case(allowed_token_ids=[2])  # token 2's logit is -inf below the root
    assert masked_prefix(c) == (0,)
    with pytest.raises(CaseError, match='prefix "0"'):
        load_case(c).target_law((0,))


def test_parameters_round_trip_through_the_case_spelling():
    c = case(prompt=[0], sequence_bias={"0,2": 1.5}, logit_bias={"1": -2}, min_tokens=1, eos_token_id=2)
    p = Params.from_case({k: v for k, v in c.items() if k in Params.CASE_KEYS})
    assert Params.from_case(p.to_case()).sampling == p.sampling
    config = p.to_protocol(3)
    assert config["sequence_bias"] == {(0, 2): 1.5} and config["logit_bias"] == {1: -2.0}
    assert config["eos_token_id"] == [2] and config["prompt"] == [0] and config["generated"] == []


def test_a_case_without_parameters_gives_the_config_it_gave_before():
    config = case_config(case(target_logits=None, target={"*": ["1/3", "1/3", "1/3"]}, arithmetic="exact"))
    assert not set(config) & {"prompt", "generated", *PARAMETERS}


class Declared:
    sampling_parameters = {"bad_words", "min_tokens"}

    def cycle(self, draft_logits, target_logits, config, temperature):
        return [0]

    def sampler_law(self, logits, config, temperature, history):
        return [1 / len(logits)] * len(logits)


def test_sampling_parameters_are_opt_in_and_checked_at_load():
    impl = Implementation(Declared(), "Declared")
    assert impl.sampling_parameters == {"bad_words", "min_tokens"} and impl.sampler_law_takes_history
    plain = select(lambda c: True, "exact", "smoke")
    assert not any(sampling_names(c) for c in plain.cases)
    declared = select(lambda c: True, "exact", "smoke", sampling=impl.sampling_parameters)
    for name in ("bad_words", "min_tokens"):
        alone = [c for c in declared.cases if sampling_names(c) == [name]]
        assert alone and all(c["depth"] >= 2 for c in alone), name
        assert any(name in sampling_names(c) and len(sampling_names(c)) == 2 for c in declared.cases)
    cov = declared.coverage()
    assert cov["bad_words"]["covered"] == ["off", "on"] and "repetition_penalty" not in cov

    class Unknown(Declared):
        sampling_parameters = {"temperature_penalty"}

    import sys
    import types

    module = types.ModuleType("rheo_test_unknown_sampling")
    module.Unknown = Unknown  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    with pytest.raises(ImplLoadError, match="temperature_penalty"):
        load_implementation(f"{module.__name__}:Unknown")


def test_every_generated_setting_certifies_lossless_in_the_reference():
    """The reference, given the processed target law at every node (docs/spec.md §9), is
    lossless on every setting alone and in pairs, at T = 1 and 1/2 (Theorem 1 does not care
    where the target law comes from)."""
    from rheo.checks.cases.sampling import with_logits
    from rheo.reference.generate import hashed_case

    seen = 0
    for cfg in sampling_configs(PARAMETERS):
        if cfg["policy"] != "rheo" or cfg["K"] != 2 or cfg["depth"] != 2 or cfg["temperature"] == "0":
            continue
        keys = {k: v for k, v in cfg.items() if k not in ("vocab_size", "depth")}
        c = with_logits(hashed_case(cfg["vocab_size"], seen, 2, 9, 0, **keys))
        if masked_prefix(c) is not None:
            continue
        report = certify(load_case(c))
        assert report.lossless, (sampling_names(c), report)
        seen += 1
    assert seen >= 40
