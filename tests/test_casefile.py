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
