"""docs/spec.md §9's input readers and boundary steps, one by one: each bad value names its
field, and the steps at their edges (an n-gram the length of the history, a three-token
sequence bias, logits far from 0). Issue 24: mutation-testing survivors of
reference/sampling.py."""

import math

import pytest

from rheo.reference import CaseError
from rheo.reference.sampling import SamplingParameters, _finite, _float, _id, _ids, _seq, process_logits, softmax

NEG = -math.inf


@pytest.mark.parametrize(
    "call, field, message",
    [
        (lambda: _float(True, "f"), "f", "must be a number, got True"),
        (lambda: _float("x", "f"), "f", "must be a number, got 'x'"),
        (lambda: _float([1], "f"), "f", "must be a number, got [1]"),
        (lambda: _float("inf", "f"), "f", "must be a finite number, got 'inf'"),
        (lambda: _id(-1, "i"), "i", "must be a token id (an integer >= 0), got -1"),
        (lambda: _id(1.0, "i"), "i", "must be a token id (an integer >= 0), got 1.0"),
        (lambda: _id(True, "i"), "i", "must be a token id (an integer >= 0), got True"),
        (lambda: _ids("12", "l"), "l", "must be a list of token ids, got '12'"),
        (lambda: _ids(5, "l"), "l", "must be a list of token ids, got 5"),
        (lambda: _ids([0, "x"], "l"), "l[1]", "must be a token id (an integer >= 0), got 'x'"),
        (lambda: _seq("", "s"), "s", 'keys are token ids joined by "," (e.g. "3,1"), got \'\''),
        (lambda: _seq(1.5, "s"), "s", 'keys are token ids joined by "," (e.g. "3,1"), got 1.5'),
        (lambda: _seq("1,x", "s"), "s", 'keys are token ids joined by "," (e.g. "3,1"), got \'1,x\''),
        (lambda: _seq((1, -2), "s"), "s", "must be a token id (an integer >= 0), got -2"),
        (
            lambda: softmax([NEG, NEG]),
            "target_logits",
            "every token is masked here (-inf), so there is no law to sample from",
        ),
        (lambda: softmax([0.0, math.inf], "t"), "t", "a logit is inf; logits are finite numbers or -inf"),
        (lambda: softmax([0.0, math.inf]), "target_logits", "a logit is inf; logits are finite numbers or -inf"),
        (
            lambda: SamplingParameters.from_case({"logit_bias": [1, 2]}),
            "logit_bias",
            'must be an object {"<token id(s)>": bias}, got [1, 2]',
        ),
        (
            lambda: SamplingParameters.from_case({"sequence_bias": {"0,1": "x"}}),
            'sequence_bias["0,1"]',
            "must be a number, got 'x'",
        ),
        (
            lambda: SamplingParameters(repetition_penalty_form="square"),
            "repetition_penalty_form",
            "must be one of 'sign', 'divide', got 'square'",
        ),
        (
            lambda: SamplingParameters(bad_words_scope="prompt"),
            "bad_words_scope",
            "must be one of 'prompt_and_generated', 'generated', got 'prompt'",
        ),
        (lambda: SamplingParameters(min_tokens=-1), "min_tokens", "must be an integer >= 0, got -1"),
        (lambda: SamplingParameters(min_tokens=True), "min_tokens", "must be an integer >= 0, got True"),
        (lambda: SamplingParameters(min_tokens=1.5), "min_tokens", "must be an integer >= 0, got 1.5"),
        (lambda: SamplingParameters(no_repeat_ngram_size=0), "no_repeat_ngram_size", "must be an integer >= 1, got 0"),
        (
            lambda: SamplingParameters(min_tokens=1),
            "eos_token_id",
            "is required when min_tokens > 0: the end-of-sequence id(s) it holds back",
        ),
        (
            lambda: SamplingParameters(allowed_token_ids=()),
            "allowed_token_ids",
            "must list one or more token ids (leave it out to allow every token)",
        ),
    ],
)
def test_each_reader_names_its_field(call, field, message):
    with pytest.raises(CaseError) as err:
        call()
    assert (err.value.field, err.value.message) == (field, message)


def test_readers_accept_what_the_case_format_allows():
    assert [_float("0.5", "f"), _float(2, "f")] == [0.5, 2.0]
    assert [_id(3, "i"), _id("4", "i"), _id(0, "i")] == [3, 4, 0]
    assert _ids([1, "2"], "l") == (1, 2) and _ids((), "l") == ()
    assert [_seq("3,1", "s"), _seq(2, "s"), _seq((0, "1"), "s")] == [(3, 1), (2,), (0, 1)]
    assert [_finite(1), _finite(0.5), _finite(True), _finite("1"), _finite(math.nan), _finite(-math.inf)] == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]
    s = SamplingParameters.from_case({"sequence_bias": {"0,1": 1.5, "2": -1}, "logit_bias": {"1": 2}})
    assert s is not None and s.sequence_bias == (((0, 1), 1.5), ((2,), -1.0)) and s.logit_bias == ((1, 2.0),)


def test_softmax_of_large_logits_stays_finite():
    law = softmax([400.0, 399.0, NEG])
    assert law[2] == 0 and math.isclose(law[0], 1 / (1 + math.exp(-1))) and math.isclose(sum(law), 1)


def test_an_ngram_as_long_as_the_history_is_banned():
    # N = 2, history (1, 1): the 2-gram (1, 1) occurred, and the tail (1) is followed by 1 again
    s = SamplingParameters(prompt=(1,), generated=(1,), no_repeat_ngram_size=2)
    assert process_logits([0.0, 0.0, 0.0], s, ()) == [0.0, NEG, 0.0]
    # N = 3, history (2, 0, 2, 0): the tail (2, 0) was followed by 2 at the start
    s3 = SamplingParameters(prompt=(2, 0, 2), no_repeat_ngram_size=3)
    assert process_logits([0.0, 0.0, 0.0], s3, (0,)) == [0.0, 0.0, NEG]
    assert process_logits([0.0, 0.0, 0.0], s3, ()) == [0.0, 0.0, 0.0]  # (0, 2) then nothing yet: no ban


def test_a_three_token_sequence_bias_needs_its_whole_prefix():
    s = SamplingParameters(prompt=(0, 1), sequence_bias=(((0, 1, 2), 2.0),))
    assert process_logits([0.0, 0.0, 0.0], s, ()) == [0.0, 0.0, 2.0]
    other = SamplingParameters(prompt=(2, 1), sequence_bias=(((0, 1, 2), 2.0),))
    assert process_logits([0.0, 0.0, 0.0], other, ()) == [0.0, 0.0, 0.0]  # ends with 1, not with 0, 1
    short = SamplingParameters(prompt=(1, 0), sequence_bias=(((0, 1, 2), 2.0),))
    assert process_logits([0.0, 0.0, 0.0], short, ()) == [0.0, 0.0, 0.0]  # ends with 0 alone: half the prefix
