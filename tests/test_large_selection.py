"""The large cases beyond exact reach follow ``supports`` as the small ones do
(``rheo.checks.cases.large.select_large``, through the gate's ``large_selection``): a
verifier of several drafts a node gets multi-draft large cases, every value of K it
supports where the quota allows and in proportion at the deep level; a chain-only one
still gets its chains.

The bug these catch: the large pool held Rheo trees only at K = 4 to 8 and Top-K trees
at K 2, 3, 4 and 8, and the quota was filled cheapest first, so a Rheo tree verifier of
K <= 3 (the small cases' range) got chains alone, and a Top-K verifier of K 2 and 3 got
one K = 2 case of 13 at the deep level. Asserting only "some case was drawn" would pass
on both."""

from __future__ import annotations

from collections import Counter

import pytest

from rheo.checks.cases.large import ALL, case_name, large_cases, narrowed
from rheo.checks.gate.prefix_law_checks import large_selection
from rheo.checks.protocol.load import Implementation

LEVELS = ("smoke", "quick", "deep")


class TopKTwoOrThree:
    """Verifies Top-K trees of 2 or 3 drafts a node, nothing else (never run here: only
    the selection is tested)."""

    def supports(self, config: dict) -> bool:
        return config["policy"] == "topk" and config["K"] in (2, 3)

    def cycle(self, draft_logits, target_logits, config, temperature):
        raise NotImplementedError


class RheoSmallPools(TopKTwoOrThree):
    """Rheo trees of K <= 3 (chains included): the user's report, every large case a chain."""

    def supports(self, config: dict) -> bool:
        return config["policy"] == "rheo" and config["K"] <= 3


class ChainsOnly(TopKTwoOrThree):
    def supports(self, config: dict) -> bool:
        return config["K"] == 1 and config["policy"] == "rheo"


class Everything(TopKTwoOrThree):
    def supports(self, config: dict) -> bool:
        return True


def _selection(cls, level):
    return large_selection(Implementation(cls(), cls.__name__), level)


@pytest.mark.parametrize("level", LEVELS)
def test_a_verifier_of_two_or_three_drafts_a_node_gets_both_and_only_those(level):
    sel = _selection(TopKTwoOrThree, level)
    per_k = Counter(c["K"] for c in sel.cases)
    assert len(sel.cases) == sel.quota and sel.shortfall(len(sel.cases)) is None, sel.cases
    assert all(c["policy"] == "topk" for c in sel.cases)
    assert set(per_k) == {2, 3}, per_k
    assert min(per_k.values()) >= sel.quota // 3, per_k  # in proportion, not one of 13


@pytest.mark.parametrize("level", LEVELS)
def test_a_rheo_tree_verifier_of_small_pools_gets_trees_not_chains_alone(level):
    sel = _selection(RheoSmallPools, level)
    per_k = Counter(c["K"] for c in sel.cases)
    assert len(sel.cases) == sel.quota, per_k
    assert sum(n for k, n in per_k.items() if k > 1) >= sel.quota / 2, per_k  # chains cheapest, not all
    assert all(c["policy"] == "rheo" and c["m"] < c["K"] and c["beam"] <= c["K"] for c in sel.cases)
    if level != "smoke":  # a quota of 3 or more spans every K it supports
        assert set(per_k) == {1, 2, 3}, per_k


@pytest.mark.parametrize("level", LEVELS)
def test_a_chain_only_verifier_still_gets_its_chains(level):
    sel = _selection(ChainsOnly, level)
    assert len(sel.cases) == sel.quota and all(c["K"] == 1 and c["policy"] == "rheo" for c in sel.cases)


@pytest.mark.parametrize("level", LEVELS)
def test_an_implementation_of_everything_gets_the_levels_cases_as_before(level):
    assert [c["name"] for c in _selection(Everything, level).cases] == [c["name"] for c in large_cases(0, level)]


def test_a_narrowed_shape_keeps_its_size_and_fits_its_pool():
    tree = narrowed(ALL[1], 2)  # V = 16, K = 8, m = 3, depth 5, beam 4, budget 60
    assert tree[:7] == ("tree", 16, 2, 1, 5, 2, 18) and tree[7:] == ALL[1][7:]
    assert case_name(tree) == "large tree V=16 K=2 m=1 D=5 R=18 T=1 top_k top_p min_p"
