"""The without-replacement corpus (examples/without_replacement.py, docs/gate.md "Races over
uniforms"): every lossless design certified exactly (never skipped) on 8 small cases, zeros
and ties among them; every planted bug caught by exact certification itself on its smallest
case, the counterexample's witness replaying to the same verdict; under ``-m extended`` each
verdict confirmed by a seeded statistical run of its own (chi-square, 10^5 cycles)."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rheo.checks.exact.certify import certify_implementation  # noqa: E402
from rheo.checks.exact.check import check_exact, cost  # noqa: E402
from rheo.checks.gate.coverage import supported_cases  # noqa: E402
from rheo.checks.protocol.calls import call_build_tree  # noqa: E402
from rheo.checks.protocol.inputs import law_instance  # noqa: E402
from rheo.checks.protocol.load import load_implementation  # noqa: E402
from rheo.checks.protocol.outputs import BadOutput, read_tree, verify_nodes  # noqa: E402
from rheo.checks.statistics.output_law import check_output_law  # noqa: E402
from rheo.checks.witness import replay  # noqa: E402
from rheo.reference import Uniforms  # noqa: E402
from rheo.reference.generate import hashed_case  # noqa: E402

from .stat_family import CASE_ALPHA, SAMPLED_DESIGNS  # noqa: E402

LOSSLESS = ["GumbelChain", "RecursiveWithoutReplacement", "IidDrafts", "BlockVerification", "SampledTree"]
BUGS = {  # the bug: the lossless design it is planted in
    "UntemperedKeys": "GumbelChain",
    "ResidualRejectedOnly": "RecursiveWithoutReplacement",
    "WithReplacementRatio": "RecursiveWithoutReplacement",
    "BlockResidualLastLaw": "BlockVerification",
    "SampledTreeFirstLaw": "SampledTree",
}
CASES = 8


def _impl(name: str):
    return load_implementation(f"examples.without_replacement:{name}")


def small_cases(impl) -> list[dict]:
    """The first 8 of the quick matrix's supported cases with V <= 5 and depth <= 2."""
    cases = supported_cases(impl, "exact", "quick").cases
    return [c for c in cases if c["vocab_size"] <= 5 and c["depth"] <= 2][:CASES]


@pytest.mark.parametrize("name", LOSSLESS)
def test_each_lossless_design_is_certified_exactly_on_8_cases(name):
    impl = _impl(name)
    cases = small_cases(impl)
    assert len(cases) == CASES
    names = " ".join(c["name"] for c in cases)
    assert "zeros" in names and "ties" in names, names
    for case in cases:
        cert = certify_implementation(impl, case)
        assert cert.verdict == "lossless", cert.summary()
        assert replay(json.loads(json.dumps(cert.with_witness()))).agrees


# A case on which verifying a second sibling against q instead of q_2 (q without the first
# draw) is lossy: after token 0 is rejected the residual is (0, 3/4, 1/4); q_2 = (0, 1/2, 1/2)
# accepts token 2 with probability 1/2, q with 5/6, so token 2 comes out 0.0167 too often at
# the root. The small matrix cases happen to have no such residual (each is lossless there).
SECOND_SIBLING = {
    "name": "second-sibling residual",
    "vocab_size": 3,
    "target": {"*": ["1/5", "9/20", "7/20"]},
    "draft": {"*": ["2/5", "3/10", "3/10"]},
    "policy": "topk",
    "K": 2,
    "depth": 1,
    "budget": 2,
    "temperature": "1",
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_each_planted_bug_is_caught_exactly_on_its_smallest_case(bug):
    impl = _impl(bug)
    cases = small_cases(impl) + ([SECOND_SIBLING] if bug == "SampledTreeFirstLaw" else [])
    outcome = check_exact(impl, cases)
    assert outcome.verdict == "fail", outcome.detail
    assert outcome.detail.startswith("not lossless (exact)"), outcome.detail
    saved = outcome.counterexample
    assert saved is not None
    by_name = {c["name"]: c for c in cases}
    lossy = [row["case_name"] for row in outcome.data["cases"] if row["verdict"] == "not lossless"]
    assert saved["case_name"] == min(lossy, key=lambda n: cost(by_name[n]))
    assert replay(json.loads(json.dumps(saved))).agrees  # the counterexample file's witness


def test_a_tree_of_samples_hands_its_draw_order_to_verify():
    """SampledTree stores children in token order: the checked tree keeps its draw_order,
    verify is handed it, and the tree law tells trees apart by it."""
    impl = _impl("SampledTree")
    case = small_cases(impl)[0]
    inst = law_instance(case)
    c = inst.config
    tree = call_build_tree(impl, inst, Uniforms.random(np.random.default_rng(0), c.K, c.B, c.depth))
    assert verify_nodes(tree)["draw_order"] == tree["draw_order"]
    assert sorted(tree["draw_order"]) == list(range(len(tree["tokens"])))  # depth 1: the root's children
    cert = certify_implementation(impl, case)
    assert cert.verdict == "lossless" and cert.trees > 1, cert.summary()


@pytest.mark.parametrize(
    "order, message",
    [([0, 0], r"sampled children of the root are at \[0, 0\], not 0..1"), ([0], "draw_order has 1 entries")],
)
def test_a_bad_draw_order_is_refused_by_name(order, message):
    inst = law_instance(SECOND_SIBLING)
    tree = {"tokens": [0, 1], "parents": [-1, -1], "kinds": [1, 1], "slots": [0, 1], "draw_order": order}
    tree["sample_probs"] = np.full((2, 3), 1 / 3)
    with pytest.raises(BadOutput, match=message):
        read_tree(tree, inst)


def test_a_race_row_costs_few_calls_symbolically():
    """Through the symbolic tracer a Gumbel race is one categorical choice: a case of the
    Gumbel-top-k tree is a few hundred runs at most."""
    impl = _impl("RecursiveWithoutReplacement")
    for case in small_cases(impl)[:4]:
        cert = certify_implementation(impl, case)
        assert cert.draws == "symbolic" and cert.runs <= 400, cert.summary()


# Where a bug moves the law most, for its statistical confirmation (its exact deviations on the
# small cases are 0.005 to 0.015 for three of them, below what 10^5 cycles detect): the largest
# exact deviation over hashed_case seeds 0-59 at T = 1, 1/2, 1/3 (chains: V = 3, depth 2;
# trees: Top-K, K = 2, V = 3, depth 1). Exact certification must still call each lossy.
DESIGNED = {
    "BlockResidualLastLaw": hashed_case(3, 47, 2, 20, 0, policy="rheo", K=1, m=0, budget=2, beam=1, temperature="1/3"),
    "WithReplacementRatio": hashed_case(3, 44, 1, 20, 0, policy="topk", K=2, budget=2, beam=2, temperature="1/3"),
    "SampledTreeFirstLaw": hashed_case(3, 44, 1, 20, 0, policy="topk", K=2, budget=2, beam=2, temperature="1/3"),
}


@pytest.mark.extended
@pytest.mark.parametrize("name", LOSSLESS + sorted(BUGS))
def test_each_verdict_is_confirmed_by_sampling(name):
    """10^5 seeded cycles of each example on its deciding case (a lossless design's first
    case, a bug's lossy case of largest exact deviation), counted against p_T by chi-square:
    the verdict agrees. A lossless design's "no difference" is one case of the statistical
    family (tests/stat_family.py); a bug must fail at the plain 1e-6."""
    impl = _impl(name)
    cases = small_cases(impl)
    if name in BUGS:
        extra = [{**DESIGNED[name], "name": f"designed {name}"}] if name in DESIGNED else []
        certs = [certify_implementation(impl, c) for c in cases + extra]
        lossy = [c for c in certs if c.verdict == "not lossless"]
        assert not extra or lossy[-1].name == extra[0]["name"], "the designed case must be lossy exactly"
        case = max(lossy, key=lambda c: c.deviation).case
    else:
        case = cases[0]
    assert len(LOSSLESS) == SAMPLED_DESIGNS  # each is a case of the family
    outcome = check_output_law(impl, 100_000, 1e-6 if name in BUGS else CASE_ALPHA, seed=0, cases=[case])
    assert outcome.verdict == ("fail" if name in BUGS else "pass"), outcome.detail
