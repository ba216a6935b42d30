"""Params and SamplingParameters as users and adapters see them: the case-file spelling
(``to_case``, read back by ``from_case``), the ``--impl`` config (``to_protocol``) and the
change of arithmetic. Each expected dict is written out by hand from docs/spec.md §8 and
the protocol's documentation, so a renamed key, a dropped field or a number in the wrong
spelling fails here (issue 24: these were mutation-testing survivors)."""

from fractions import Fraction

import pytest

from rheo.reference import CaseError, Params, TargetFilters
from rheo.reference.params import PAPER_TREE, Proxy, _text
from rheo.reference.sampling import SamplingParameters

F = Fraction


# every configuration key set, in its case-file spelling (exact numbers as rational strings)
FULL_EXACT_CASE = {
    "policy": "rheo",
    "K": 4,
    "m": 2,
    "depth": 3,
    "budget": 7,
    "beam": 2,
    "proxy": {"constant": "1/3"},
    "epsilon": "1/8",
    "tie_break": "token",
    "temperature": "1/2",
    "draft_top_k": 3,
    "verify": "sample_last",
    "draft_law": "dense",
    "target_top_k": 3,
    "target_top_p": "3/4",
    "target_min_p": "1/5",
}


def _full_exact() -> Params:
    return Params.from_case(FULL_EXACT_CASE)


def test_to_case_spells_every_key_of_an_exact_case():
    # every key written back as it was read, and the arithmetic the case left to its default
    assert _full_exact().to_case() == {**FULL_EXACT_CASE, "arithmetic": "exact"}


def test_to_case_of_defaults_and_of_top_k():
    # Top-K has no m; the beam is resolved to K; unset filters are None; epsilon 0 is "0"
    assert Params(policy="topk", K=3, depth=2, budget=4).to_case() == {
        "policy": "topk",
        "K": 3,
        "depth": 2,
        "budget": 4,
        "beam": 3,
        "proxy": "rheo",
        "epsilon": "0",
        "tie_break": "slot",
        "temperature": "1",
        "draft_top_k": None,
        "verify": "rheo",
        "draft_law": "sampled",
        "arithmetic": "exact",
        "target_top_k": None,
        "target_top_p": None,
        "target_min_p": None,
    }


@pytest.mark.parametrize(
    "case",
    [
        {"policy": "rheo", "K": 4, "m": 2, "depth": 3, "budget": 7},
        {"policy": "topk", "K": 2, "depth": 1, "budget": 2, "target_top_p": "1/2"},
        {"policy": "rheo", "K": 3, "m": 0, "depth": 2, "budget": 3, "proxy": {"per_prefix": {"": "1/2", "*": "1/4"}}},
        {"policy": "rheo", "K": 3, "m": 1, "depth": 2, "budget": 3, "proxy": "self", "arithmetic": "float64"},
        {
            "policy": "rheo",
            "K": 3,
            "m": 1,
            "depth": 2,
            "budget": 3,
            "arithmetic": "float64",
            "epsilon": 0.1,
            "temperature": 0.7,
            "target_min_p": 0.05,
            "repetition_penalty": 1.5,
            "prompt": [1],
            "generated": [0],
        },
    ],
)
def test_from_case_reads_back_what_to_case_writes(case):
    p = Params.from_case(case)
    assert Params.from_case(p.to_case()) == p.replace(beam=p.B)  # the beam is written resolved
    assert Params.from_case(_full_exact().to_case()) == _full_exact()


def test_proxy_spellings():
    assert Proxy().describe() == "rheo"
    assert Proxy("self").describe() == "self"
    assert Proxy("constant", value=F(1, 4)).describe() == {"constant": "1/4"}
    assert Proxy("constant", value=0.25).describe() == {"constant": "0.25"}
    table = {(): F(1, 2), (0, 2): F(1), None: F(3, 10)}
    assert Proxy("per_prefix", table=table).describe() == {"per_prefix": {"": "1/2", "0,2": "1", "*": "3/10"}}


def test_numbers_are_spelled_as_rationals_or_float_reprs():
    assert [_text(F(3, 10)), _text(F(2)), _text(F(0)), _text(0.1), _text(1), _text(F(-1, 2))] == [
        "3/10",
        "2",
        "0",
        "0.1",
        "1.0",
        "-1/2",
    ]


def test_to_protocol_is_the_config_an_adapter_receives():
    assert _full_exact().to_protocol(5) == {
        "vocab_size": 5,
        "policy": "rheo",
        "K": 4,
        "m": 2,
        "depth": 3,
        "budget": 7,
        "beam": 2,
        "draft_top_k": 3,
        "epsilon": 0.125,
        "target_top_k": 3,
        "target_top_p": 0.75,
        "target_min_p": 0.2,
    }
    cfg = Params(policy="topk", K=3, depth=2, budget=4).to_protocol(9)
    assert cfg["m"] == 0 and cfg["beam"] == 3 and cfg["target_top_p"] is None and cfg["target_min_p"] is None
    assert type(cfg["epsilon"]) is float and type(_full_exact().to_protocol(5)["target_top_p"]) is float


def test_to_protocol_adds_the_sampling_parameters_only_when_set():
    s = SamplingParameters(prompt=(1,), generated=(2, 0), logit_bias=((3, -1.5),), sequence_bias=(((0, 1), 2.0),))
    p = Params(policy="rheo", K=2, m=1, depth=1, budget=2, arithmetic="float64", sampling=s)
    cfg = p.to_protocol(4)
    assert cfg["prompt"] == [1] and cfg["generated"] == [2, 0]
    assert cfg["logit_bias"] == {3: -1.5} and cfg["sequence_bias"] == {(0, 1): 2.0}
    assert set(cfg) - set(p.replace(sampling=None).to_protocol(4)) == {
        "prompt",
        "generated",
        "logit_bias",
        "sequence_bias",
    }


def test_sampling_to_case_spells_every_parameter_with_its_variant():
    s = SamplingParameters(
        prompt=(0, 1),
        generated=(2,),
        repetition_penalty=1.25,
        repetition_penalty_form="divide",
        frequency_penalty=0.5,
        presence_penalty=-0.25,
        logit_bias=((1, 2.0), (3, -1.0)),
        sequence_bias=(((0, 2), 1.5),),
        bad_words=((1, 2), (3,)),
        bad_words_scope="generated",
        no_repeat_ngram_size=2,
        allowed_token_ids=(0, 1, 2),
        min_tokens=2,
        eos_token_id=(3,),
    )
    out = s.to_case()
    assert out == {
        "prompt": [0, 1],
        "generated": [2],
        "allowed_token_ids": [0, 1, 2],
        "bad_words": [[1, 2], [3]],
        "bad_words_scope": "generated",
        "no_repeat_ngram_size": 2,
        "min_tokens": 2,
        "eos_token_id": [3],
        "logit_bias": {"1": 2.0, "3": -1.0},
        "sequence_bias": {"0,2": 1.5},
        "repetition_penalty": 1.25,
        "repetition_penalty_form": "divide",
        "frequency_penalty": 0.5,
        "presence_penalty": -0.25,
    }
    assert SamplingParameters.from_case(out) == s
    proto = s.to_protocol()
    assert proto["logit_bias"] == {1: 2.0, 3: -1.0} and proto["sequence_bias"] == {(0, 2): 1.5}
    assert {k: v for k, v in proto.items() if k not in ("logit_bias", "sequence_bias")} == {
        k: v for k, v in out.items() if k not in ("logit_bias", "sequence_bias")
    }
    assert SamplingParameters(prompt=(1,)).to_case() == {"prompt": [1], "generated": []}


def test_in_arithmetic_converts_every_number_and_keeps_the_rest():
    p = _full_exact()
    f = p.in_arithmetic("float64")
    assert f.arithmetic == "float64" and not f.exact and p.exact
    assert (f.epsilon, f.proxy.value, f.target_filters) == (0.125, 1 / 3, TargetFilters(3, 0.75, 0.2))
    assert all(type(x) is float for x in (f.epsilon, f.proxy.value, f.target_filters.top_p, f.target_filters.min_p))
    assert f.temperature.value == 0.5 and type(f.temperature.value) is float
    assert (
        f.replace(
            arithmetic="exact",
            epsilon=p.epsilon,
            proxy=p.proxy,
            target_filters=p.target_filters,
            temperature=p.temperature,
        )
        == p
    )
    assert f.in_arithmetic("float64") is f and p.in_arithmetic("exact") is p
    back = f.in_arithmetic("exact")
    assert (
        back.epsilon == F(1, 8)
        and type(back.epsilon) is F
        and back.target_filters == TargetFilters(3, F(3, 4), F(1, 5))
    )
    assert back.temperature == p.temperature
    assert f.proxy.kind == "constant" and type(f.proxy.value) is float and type(back.proxy.value) is F
    per = Params(
        policy="rheo", K=2, m=0, depth=1, budget=2, proxy=Proxy("per_prefix", table={(): F(1, 2), None: F(1, 4)})
    )
    fper = per.in_arithmetic("float64").proxy
    assert fper == Proxy("per_prefix", table={(): 0.5, None: 0.25})  # Fraction(1, 2) == 0.5: check the types too
    assert fper.table is not None and all(type(v) is float for v in fper.table.values())
    assert (
        PAPER_TREE.in_arithmetic("exact").proxy == Proxy()
        and PAPER_TREE.in_arithmetic("exact").target_filters == TargetFilters()
    )


def test_sampling_parameters_refuse_exact_arithmetic_by_field():
    s = SamplingParameters(presence_penalty=0.5)
    p = Params(policy="rheo", K=2, m=1, depth=1, budget=2, arithmetic="float64", sampling=s)
    with pytest.raises(CaseError) as err:
        p.in_arithmetic("exact")
    assert err.value.field == "arithmetic"
    with pytest.raises(CaseError) as err:
        Params(policy="rheo", K=2, m=1, depth=1, budget=2, sampling=s)
    assert err.value.field == "presence_penalty"


def test_replace_checks_the_copy_again():
    p = Params(policy="rheo", K=3, m=1, depth=2, budget=3)
    assert p.replace(budget=5).budget == 5 and p.budget == 3
    with pytest.raises(CaseError) as err:
        p.replace(m=3)
    assert err.value.field == "m"


def test_a_float_temperature_has_no_exact_counterpart():
    # exact arithmetic takes T = 0 or 1/k only (docs/spec.md §8): T = 0.7 cannot be converted
    p = Params.from_case(
        {"policy": "rheo", "K": 2, "m": 1, "depth": 1, "budget": 2, "arithmetic": "float64", "temperature": 0.7}
    )
    with pytest.raises(CaseError) as err:
        p.in_arithmetic("exact")
    assert err.value.field == "temperature"
    half = p.replace(temperature=p.temperature.parse("1/2", False)).in_arithmetic("exact")
    assert half.temperature.power == 2 and half.exact


def test_every_token_id_is_named_by_its_field():
    s = SamplingParameters(
        prompt=(0,),
        generated=(1,),
        logit_bias=((2, 1.0),),
        sequence_bias=(((0, 3), 1.0),),
        bad_words=((4,),),
        allowed_token_ids=(5,),
        min_tokens=1,
        eos_token_id=(6,),
    )
    assert s.token_ids() == [
        ("prompt[0]", 0),
        ("generated[0]", 1),
        ('logit_bias["2"]', 2),
        ('sequence_bias["0,3"]', 0),
        ('sequence_bias["0,3"]', 3),
        ("bad_words[0]", 4),
        ("allowed_token_ids[0]", 5),
        ("eos_token_id[0]", 6),
    ]


def test_a_bad_prefix_key_names_its_field():
    """A prefix key that is not token ids joined by "," names the field it came from, "prefix"
    when the caller gives none."""
    from rheo.reference.params import parse_prefix

    assert parse_prefix("3") == (3,) and parse_prefix("0,2") == (0, 2) and parse_prefix("") == ()
    for args, field in [(("0,x",), "prefix"), (("a", 'target["a"]'), 'target["a"]')]:
        with pytest.raises(CaseError) as err:
            parse_prefix(*args)
        assert err.value.field == field and "token ids joined by" in err.value.message


BASE = dict(policy="rheo", K=3, m=1, depth=2, budget=3)


@pytest.mark.parametrize(
    "changes, field, message",
    [
        ({"policy": "greedy"}, "policy", "must be one of 'rheo', 'topk', got 'greedy'"),
        ({"K": 0}, "K", "must be an integer >= 1, got 0"),
        ({"K": True}, "K", "must be an integer >= 1, got True"),
        ({"K": 2.0}, "K", "must be an integer >= 1, got 2.0"),
        ({"depth": 0}, "depth", "must be an integer >= 1, got 0"),
        ({"budget": 0}, "budget", "must be an integer >= 1, got 0"),
        ({"m": None}, "m", 'is required when policy is "rheo" (an integer 0 <= m <= K-1)'),
        ({"m": -1}, "m", "must be an integer >= 0, got -1"),
        ({"m": 3}, "m", "must be <= K-1 = 2, got 3"),
        ({"beam": 0}, "beam", "must be an integer >= 1, got 0"),
        ({"beam": 4}, "beam", "must be <= K = 3 (a node has at most K children), got 4"),
        ({"draft_top_k": 0}, "draft_top_k", "must be an integer >= 1, got 0"),
        ({"tie_break": "id"}, "tie_break", "must be one of 'slot', 'token', got 'id'"),
        ({"verify": "greedy"}, "verify", "must be one of 'rheo', 'sample_last', 'class_law', got 'greedy'"),
        ({"draft_law": "top1"}, "draft_law", "must be one of 'sampled', 'dense', 'untempered', got 'top1'"),
        ({"arithmetic": "float32"}, "arithmetic", "must be one of 'exact', 'float64', got 'float32'"),
        (
            {"temperature": 1},
            "temperature",
            "must be a Temperature (use Params.from_case to read a number or string)",
        ),
        ({"proxy": "rheo"}, "proxy", "must be a Proxy (use Params.from_case to read the case-file spelling)"),
        ({"epsilon": Fraction(-1, 10)}, "epsilon", "must be >= 0, got -1/10"),
        ({"proxy": Proxy("constant", Fraction(0))}, "proxy.constant", "must lie in (0, 1], got 0"),
        ({"proxy": Proxy("constant", None)}, "proxy.constant", "must lie in (0, 1], got None"),
        (
            {"proxy": Proxy("magic")},
            "proxy",
            "must be one of 'rheo', 'self', 'constant', 'per_prefix', 'callable', got 'magic'",
        ),
        (
            {"proxy": Proxy("per_prefix", table={(0, 1): Fraction(0)})},
            'proxy.per_prefix["0,1"]',
            "must lie in (0, 1], got 0",
        ),
        (
            {"proxy": Proxy("per_prefix", table={None: Fraction(2)})},
            'proxy.per_prefix["*"]',
            "must lie in (0, 1], got 2",
        ),
        ({"target_filters": TargetFilters(top_k=0)}, "target_top_k", "must be an integer >= 1, got 0"),
        ({"target_filters": TargetFilters(top_p=Fraction(0))}, "target_top_p", "must lie in (0, 1], got 0"),
        ({"target_filters": TargetFilters(top_p=Fraction(3, 2))}, "target_top_p", "must lie in (0, 1], got 3/2"),
        ({"target_filters": TargetFilters(min_p=Fraction(11, 10))}, "target_min_p", "must lie in [0, 1], got 11/10"),
        (
            {"sampling": {"min_tokens": 1}},
            "sampling",
            "must be a SamplingParameters (use Params.from_case to read case keys)",
        ),
    ],
)
def test_params_made_directly_name_the_bad_field(changes, field, message):
    """The Python API makes Params directly, past the case-file reader: each check names
    its field and says what it takes (a bool is no integer, nor is 2.0)."""
    with pytest.raises(CaseError) as err:
        Params(**{**BASE, **changes})
    assert (err.value.field, err.value.message) == (field, message)
    assert Params(**{**BASE, "policy": "topk", "m": None}).m is None  # m is Rheo's alone


def test_params_take_the_closed_ends_of_their_ranges():
    """The other side of each range above: a constant proxy of 1, per-prefix values of 1,
    top_p 1 and min_p 0 or 1, beam = K, m = K - 1, epsilon 0 are all taken."""
    one = Fraction(1)
    for changes in (
        {"proxy": Proxy("constant", one)},
        {"proxy": Proxy("per_prefix", table={None: one, (0,): one})},
        {"target_filters": TargetFilters(top_p=one, min_p=Fraction(0))},
        {"target_filters": TargetFilters(min_p=one)},
        {"beam": 3, "m": 2, "epsilon": Fraction(0)},
    ):
        params = Params(**{**BASE, **changes})
        assert all(getattr(params, k) == v for k, v in changes.items())


def test_sampling_parameters_with_nothing_set_still_need_float64():
    """Sampling parameters in exact arithmetic are refused naming the first one set, or
    "sampling" when none is set (the Python API can hand an empty SamplingParameters)."""
    message = (
        'sampling parameters need "arithmetic": "float64" (the exponential of a bias or a penalised logit '
        "is not rational; docs/spec.md §9)"
    )
    with pytest.raises(CaseError) as err:
        Params(**BASE, sampling=SamplingParameters())
    assert (err.value.field, err.value.message) == ("sampling", message)


def test_a_callable_proxy_needs_its_function():
    """Proxy("callable") without fn is refused when it is made, naming "proxy", instead of
    failing an assertion deep in the reference once a node's proxy is asked for."""
    with pytest.raises(CaseError) as err:
        Proxy("callable")
    assert (err.value.field, err.value.message) == (
        "proxy",
        "a callable proxy needs fn(prefix, node_laws) -> value, got fn=None",
    )
    with pytest.raises(CaseError, match="got fn=1"):
        Proxy("callable", fn=1)
    assert Proxy("callable", fn=len).fn is len and Proxy("rheo").fn is None
