"""docs/spec.md §8: case files, their schema and the errors on bad input."""

import json

import pytest

from rheo.casefile import builtin_examples, load_case, parse_case_text, schema, validate_case
from rheo.reference import CaseError

GOOD = {
    "vocab_size": 3,
    "target": {"*": ["1/5", "1/2", "3/10"]},
    "draft": {"*": ["1/2", "3/10", "1/5"]},
    "policy": "rheo",
    "K": 3,
    "m": 1,
    "depth": 1,
    "budget": 2,
}


def bad(**changes):
    case = json.loads(json.dumps(GOOD))
    for k, v in changes.items():
        if v is None:
            case.pop(k)
        else:
            case[k] = v
    return case


@pytest.mark.parametrize(
    "case,field,words",
    [
        (bad(colour="red"), "colour", "unknown key"),
        (bad(K=None), "K", "required"),
        (bad(m=None), "m", "required"),
        (bad(draft={"*": ["1/2", "1/2"]}), 'draft["*"]', "vocab_size = 3"),
        (bad(draft={"*": ["-1/2", "1", "1/2"]}), 'draft["*"][0]', ">= 0"),
        (bad(target={"*": ["1/2", "1/2", "1/2"]}), 'target["*"]', "sum to exactly 1"),
        (bad(m=3), "m", "K-1"),
        (bad(budget=0), "budget", ">= 1"),
        (bad(temperature="-1"), "temperature", ">= 0"),
        (bad(temperature="0.7"), "temperature", "float64"),
        (bad(proxy={"constant": "0"}), "proxy.constant", "(0, 1]"),
        (bad(proxy={"constant": "3/2"}), "proxy.constant", "(0, 1]"),
        (bad(proxy="wild"), "proxy", "rheo"),
        (bad(policy="greedy"), "policy", "one of"),
        (bad(K="3"), "K", "integer"),
        (bad(target={"a": ["1/5", "1/2", "3/10"]}), "target", "prefix"),
        (bad(draft={"5": ["1/2", "3/10", "1/5"]}), 'draft["5"]', "vocab_size is 3"),
        (bad(draft={"*": ["x", "3/10", "1/5"]}), 'draft["*"][0]', "rational"),
        (bad(beam=4), "beam", "<= K"),
        (bad(target_top_p="0"), "target_top_p", "(0, 1]"),
        (bad(epsilon="-1/10"), "epsilon", ">= 0"),
    ],
)
def test_bad_input_names_the_field(case, field, words):
    with pytest.raises(CaseError) as err:
        load_case(case)
    assert err.value.field == field, str(err.value)
    assert words in err.value.message, str(err.value)


def test_json_numbers_and_float_mode():
    case = parse_case_text(json.dumps(bad(target={"*": [0.2, 0.5, 0.3]})))
    inst = load_case(case)
    from fractions import Fraction as F

    assert inst.target_law(()) == (F(1, 5), F(1, 2), F(3, 10))
    inst = load_case({**case, "arithmetic": "float64", "temperature": 0.7})
    assert isinstance(inst.target_law(())[0], float)


def test_schema_is_a_valid_json_schema_and_examples_validate():
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(schema())
    for case in builtin_examples().values():
        validate_case(case)
    assert {"abc", "abc-constant", "abc-full"} <= set(builtin_examples())


def test_invalid_json_is_reported_with_position():
    with pytest.raises(CaseError, match="line 1"):
        parse_case_text("{", "x.json")


@pytest.mark.parametrize(
    "case,field,words",
    [
        (bad(target={0: ["1/5", "1/2", "3/10"]}), "target", 'got the int 0; write it as "0"'),
        (bad(draft={(0, 1): ["1/2", "3/10", "1/5"]}), "draft", 'got the tuple (0, 1); write it as "0,1"'),
        (bad(proxy={"per_prefix": {0: "1/2"}}), "proxy.per_prefix", 'write it as "0"'),
        ({**GOOD, 1: "x"}, "(case)", "keys are strings, got the int 1"),
        (bad(target={"*": ["1/5", "1/2", None]}), 'target["*"][2]', "must be of type number or string, got null"),
        (bad(target={"1" * 30: ["1/5", "1/2", "3/10"]}), 'target["' + "1" * 30 + '"]', "token id of 30 digits"),
        (bad(epsilon="1e-999999999"), "epsilon", "has exponent -999999999"),
        (bad(temperature="1" * 5000), "temperature", "has a number with 5000 digits"),
        (bad(temperature="1/1001"), "temperature", "T = 1/k for k <= 1000"),
        (bad(depth=10**30), "depth", "must be <= 1000000"),
    ],
)
def test_keys_and_numbers_a_python_dict_can_hold_raise_case_errors(case, field, words):
    """load_case on a Python dict: integer or tuple keys, over-long numbers (CaseError, never
    AttributeError or an hours-long int conversion)."""
    with pytest.raises(CaseError) as err:
        load_case(case)
    assert err.value.field == field, str(err.value)
    assert words in err.value.message, str(err.value)


def test_every_unknown_key_is_named():
    with pytest.raises(CaseError) as err:
        load_case(bad(colour="red", check="exact certification"))
    assert err.value.field == "check" and err.value.message.startswith("unknown key (also unknown: colour); allowed")


def test_exact_python_numbers_in_tables_are_read_as_before():
    from fractions import Fraction as F

    inst = load_case(bad(target={"*": [F(1, 5), F(1, 2), F(3, 10)]}))
    assert inst.target_law(()) == (F(1, 5), F(1, 2), F(3, 10))


def test_reading_is_capped_and_json_nesting_bounded(tmp_path):
    from rheo.casefile import MAX_NESTING, case_of, nesting, read_case

    (tmp_path / "c.json").write_text(json.dumps({"check": "decision equality", "case": GOOD}))
    case, note = case_of(read_case(tmp_path / "c.json"))
    assert case == GOOD and '"decision equality" check' in note
    assert case_of(GOOD) == (GOOD, None)
    assert nesting({"target": {"*": [1]}}) == 3
    with pytest.raises(CaseError, match=f"more than {MAX_NESTING} deep"):
        parse_case_text("[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1), "x.json")
    with pytest.raises(CaseError, match="has a number with 5000 digits"):
        parse_case_text("[" + "1" * 5000 + "]", "x.json")
    with pytest.raises(CaseError, match="has exponent 99999"):
        parse_case_text("[1e99999]", "x.json")


# every independent error at once (issue 20) ------------------------------------------------

MANY = [  # (case, the fields of its errors in order, the one message the loader gave before it listed them all)
    (
        bad(colour="red", m=3, target={"*": ["1/5", "1/2", "1/2"]}),
        ["colour", 'target["*"]', "m"],
        "colour: unknown key; allowed keys here: K, allowed_token_ids, arithmetic, bad_words, bad_words_scope, "
        "beam, budget, depth, description, draft, draft_law, draft_top_k, eos_token_id, epsilon, expected, "
        "frequency_penalty, generated, logit_bias, m, min_tokens, n_tokens, name, no_repeat_ngram_size, policy, "
        "presence_penalty, prompt, proxy, repetition_penalty, repetition_penalty_form, sequence_bias, "
        "stop_sequences, stop_token_ids, target, "
        "target_logits, target_min_p, target_top_k, target_top_p, temperature, tie_break, verify, vocab_size",
    ),
    (
        {"vocab_size": 2},
        ["target", "draft", "policy", "K", "depth", "budget"],
        "target: is required (see `rheo exact --help` for the case format)",
    ),
    (
        bad(beam=4, m=3, epsilon="-1", proxy={"constant": "2"}, target_top_p="0"),
        ["m", "beam", "epsilon", "proxy.constant", "target_top_p"],
        "m: must be <= K-1 = 2, got 3",
    ),
    (
        bad(
            target={"*": ["1/5", "1/2", "1/2"], "7": ["1/3", "1/3", "1/3"]},
            draft={"*": ["x", "1/2", "1/2"], "": ["1/2", "1/2"]},
        ),
        ['target["*"]', 'target["7"]', 'draft["*"][0]', 'draft[""]'],
        'target["*"]: must sum to exactly 1 in exact mode, sums to 6/5',
    ),
    (
        bad(epsilon="1e-99999", temperature="1/1001", depth=10**7, m=5),
        ["epsilon", "depth", "temperature", "m"],
        "epsilon: has exponent -99999; a case file's numbers have exponents below 4300",
    ),
]


@pytest.mark.parametrize("case,fields,before", MANY, ids=["three", "missing", "parameters", "tables", "limits"])
def test_every_independent_error_is_reported_and_the_first_is_the_one_error_of_before(case, fields, before):
    with pytest.raises(CaseError) as err:
        load_case(case)
    e = err.value
    assert [x.field for x in e.errors] == fields, [str(x) for x in e.errors]
    assert str(e) == before and str(e.errors[0]) == before  # CaseError's field and message: the first error
    assert (e.field, e.message) == (e.errors[0].field, e.errors[0].message)
    assert len({str(x) for x in e.errors}) == len(e.errors)  # each once


def test_errors_are_capped_at_twenty():
    from rheo.casefile import MAX_ERRORS

    case = bad(target={"*": GOOD["target"]["*"], **{str(i): ["1/2", "1/2", "1/2"] for i in range(30)}})
    with pytest.raises(CaseError) as err:
        load_case(case)
    assert MAX_ERRORS == 20 and len(err.value.errors) == 20
    assert [x.field for x in err.value.errors[:4]] == ['target["0"]', 'target["1"]', 'target["2"]', 'target["3"]']
    assert str(err.value) == 'target["0"]: must sum to exactly 1 in exact mode, sums to 3/2'


def test_an_error_that_makes_the_rest_meaningless_stops_at_once():
    with pytest.raises(CaseError) as err:
        load_case(["not", "an", "object"])
    assert [str(x) for x in err.value.errors] == ["(case): a case file holds one JSON object"]
    with pytest.raises(CaseError) as err:
        parse_case_text('{"vocab_size": 3, "K": ', "x.json")
    assert len(err.value.errors) == 1 and err.value.errors[0] is err.value  # raised alone: lists itself
