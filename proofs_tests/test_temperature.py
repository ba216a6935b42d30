"""The temperature claims: at T = 0 (epsilon = 0) m = 0 degenerates to the Top-K tree;
m = 1 keeps Top-K's candidate tokens but its proxy can change the ranking, so the tree can
differ."""

from hypothesis import given

from rheo.casefile import load_case
from rheo.checks.cases.strategies import cases
from rheo.reference import build_tree, enumerate_choices, make_instance

from .helpers import cap, describe


def only_tree(inst):
    trees = list(enumerate_choices(lambda ch: build_tree(inst, ch), 1))
    assert len(trees) == 1, "T = 0 leaves no randomness in tree construction"
    return trees[0][1]


def token_tree(tree):
    return sorted(n.prefix for n in tree.pruned)


def topk_twin(case):
    twin = {k: v for k, v in case.items() if k not in ("m", "proxy", "epsilon")}
    twin["policy"] = "topk"
    return twin


@given(cases(cap=cap(), policies=("rheo",), temperatures=("0",), m=0, extra={"epsilon": "0"}))
def test_temperature_zero_m0_builds_the_topk_tree(case):
    rheo = only_tree(load_case(case))
    topk = only_tree(load_case(topk_twin(case)))
    assert token_tree(rheo) == token_tree(topk), describe(case)


@given(cases(cap=cap(), policies=("rheo",), temperatures=("0",), m=1, min_K=2))
def test_temperature_zero_m1_keeps_topk_candidates(case):
    """At T = 0 the m = 1 sample is x_2: every expanded node has Top-K's children tokens."""
    inst = load_case(case)
    twin = load_case(topk_twin(case))
    tree = only_tree(inst)
    for _, prefix, _ in tree.expansions:
        ours = sorted(n.prefix[-1] for n in tree.recorded if n.prefix[:-1] == prefix)
        assert ours == sorted(twin.node_laws(prefix).leads), describe(case)


def test_temperature_zero_m1_proxy_changes_the_tree():
    """q = (3/5, 1/4, 3/20): Top-K scores B at 1/4 < AA at 9/25; m = 1 scores the sample B
    at its proxy min(3/5, 2/5) = 2/5 > 9/25, so with budget 2 the trees differ."""
    common = dict(K=2, depth=2, budget=2, beam=1, temperature="0")
    q, p = ["3/5", "1/4", "3/20"], ["1/3", "1/3", "1/3"]
    rheo = only_tree(make_instance(3, p, q, policy="rheo", m=1, **common))
    topk = only_tree(make_instance(3, p, q, policy="topk", **common))
    assert token_tree(topk) == [(0,), (0, 0)]
    assert token_tree(rheo) == [(0,), (1,)]


def test_temperature_zero_m1_differs_from_topk_somewhere():
    from hypothesis import Phase, find, settings

    strategy = cases(policies=("rheo",), temperatures=("0",), m=1, min_K=2, min_depth=2, max_depth=2, max_vocab=4)
    case = find(
        strategy,
        lambda c: token_tree(only_tree(load_case(c))) != token_tree(only_tree(load_case(topk_twin(c)))),
        settings=settings(
            max_examples=2000, database=None, derandomize=True, deadline=None, phases=[Phase.generate, Phase.shrink]
        ),
    )
    assert case["K"] >= 2
