"""Meta-tests for the testers: the strategies build only valid instances of the promised
shape."""

from hypothesis import Phase, find, given, settings

from rheo.casefile import load_case, validate_case
from rheo.checks.cases.strategies import cases, draft_prefixes, joint_draw_bound, per_node_proxy_cases
from rheo.reference.instance import prefix_key

from .helpers import cap


@given(cases(cap=cap(), filters=True))
def test_strategy_cases_are_valid_and_capped(case):
    validate_case(case)
    inst = load_case(case)
    assert (
        joint_draw_bound(case["vocab_size"], case["policy"], case["K"], case.get("m", 0), case["depth"], case["beam"])
        <= cap()
    )
    assert 1 <= case["beam"] <= case["K"] and 1 <= case["depth"] <= 3 and case["vocab_size"] <= 5
    for prefix in draft_prefixes(case):
        assert inst.target.laws.get(prefix) is not None or inst.target.default is not None
        assert case["target"][prefix_key(prefix)] != case["draft"][prefix_key(prefix)], "p == q at a prefix"


@given(per_node_proxy_cases(above_bound=True, cap=cap()))
def test_per_node_proxies_respect_the_rank_bound(case):
    inst = load_case(case)
    for prefix in draft_prefixes(case):
        bound = inst.rank_bound(prefix)
        value = inst.node_laws(prefix).proxy
        assert value is None or bound is None or bound <= value <= 1


def test_strategy_reaches_prefix_dependent_tables():
    case = find(
        cases(),
        lambda c: c["depth"] >= 2 and c["draft"][""] != c["draft"]["0"] and c["target"][""] != c["target"]["0"],
        settings=settings(database=None, derandomize=True, phases=[Phase.generate]),
    )
    assert case["draft"][""] != case["draft"]["0"]


def test_strategy_reaches_the_promised_corners():
    s = settings(database=None, derandomize=True, max_examples=3000, phases=[Phase.generate])
    find(cases(), lambda c: c["vocab_size"] == 5 and c["depth"] == 3, settings=s)
    find(cases(), lambda c: c["K"] == 4 and c.get("m") == 3, settings=s)
    find(cases(), lambda c: c["draft_top_k"] is not None and c["temperature"] == "1/3", settings=s)
    find(cases(), lambda c: c["budget"] == c["K"] * (1 + c["beam"] * (c["depth"] - 1)) and c["depth"] >= 2, settings=s)
