"""Exact certification of implementations (rheo.checks.exact): the acceptance cases of
docs/gate.md, "Exact certification". Every verdict below is computed by enumerating every
random choice the implementation makes, its own draws or the handed uniforms."""

from __future__ import annotations

import pytest

from rheo.casefile import load_case
from rheo.checks.cases.generations import GENERATION_CASES, generation_case
from rheo.checks.exact.certify import certify_implementation
from rheo.checks.exact.check import check_exact
from rheo.checks.exact.generation import certify_generation
from rheo.checks.protocol.load import load_implementation
from rheo.reference import certify, cycle_law
from rheo.reference.generate import hashed_case

pytest.importorskip("torch")  # the peer-style examples draw with torch

RHEO_M1 = hashed_case(3, 1, 2, policy="rheo", K=2, m=1, budget=3, beam=2, temperature="1/2")
TOPK = hashed_case(4, 2, 2, policy="topk", K=2, budget=4, beam=2, temperature="1")
CHAIN = hashed_case(3, 3, 3, policy="rheo", K=1, m=0, budget=3, beam=1, temperature="1/2")
FILTERED = hashed_case(
    4, 4, 2, policy="rheo", K=3, m=1, budget=4, beam=2, temperature="1", target_top_k=2, target_top_p="9/10"
)
SPARSE = hashed_case(5, 7, 2, policy="rheo", K=3, m=1, budget=4, beam=2, temperature="1/2", draft_top_k=3)


GENERATION = generation_case(*GENERATION_CASES["quick"][3])  # whole generations: n = 4, Top-K, V = 2


def cert(spec: str, case: dict):
    """Its certificate: of whole generations for an implementation with only ``generate``."""
    impl = load_implementation(spec)
    if impl.runs_generations and not impl.per_request:
        return certify_generation(impl, case)
    return certify_implementation(impl, case)


def test_the_loop_example_is_lossless_and_its_law_is_the_references():
    c = cert("examples.loop_impl:LoopImplementation", RHEO_M1)
    assert c.verdict == "lossless" and c.deviation < 1e-12
    ref = cycle_law(load_case(RHEO_M1)).law
    assert set(c.law) == set(ref)
    assert max(abs(c.law[o] - float(p)) for o, p in ref.items()) < 1e-12
    assert cert("examples.loop_impl:LoopImplementation", FILTERED).verdict == "lossless"


def test_the_token_tie_break_bug_is_not_lossless_and_agrees_with_the_reference_variant():
    c = cert("examples.buggy_impl:TokenTieBreak", RHEO_M1)
    assert c.verdict == "not lossless"
    ref = certify(load_case({**RHEO_M1, "tie_break": "token"}))
    assert not ref.lossless
    assert c.deviation == pytest.approx(float(ref.deviation.value), abs=c.tolerance)


@pytest.mark.parametrize(
    "spec, case",
    [
        ("examples.buggy_impl:ReusedUniform", RHEO_M1),
        ("examples.buggy_impl:SkippedFilters", FILTERED),
        ("examples.loop_generation:StaleRootRow", GENERATION),
    ],
    ids=["reused uniform", "skipped target filters", "stale root row across cycles"],
)
def test_bugs_that_break_losslessness_are_not_lossless(spec, case):
    c = cert(spec, case)
    assert c.verdict == "not lossless" and c.deviation > 1e-3, c.summary()


@pytest.mark.parametrize("spec", ["examples.buggy_impl:IgnoresDraftTopK", "examples.buggy_impl:UntemperedResidual"])
def test_departures_from_the_spec_that_keep_the_law_are_lossless(spec):
    """They draw from a law the spec does not prescribe, but hand the verifier the law they
    really drew from: exact certification says lossless (decision equality, in
    tests/test_harness.py, says they are not the specified algorithm)."""
    c = cert(spec, SPARSE)
    assert c.verdict == "lossless", c.summary()
    # and the case does exercise the departure: the reference's own variant differs
    assert not certify(load_case({**SPARSE, "draft_law": "untempered"})).lossless


@pytest.mark.parametrize("case", [TOPK, RHEO_M1, FILTERED], ids=["topk", "rheo m=1", "rheo m=1 filters"])
@pytest.mark.parametrize("spec", ["examples.eagle_style:EagleVerifier", "examples.sglang_style:SGLangVerifier"])
def test_one_hot_and_running_sum_verifiers_are_lossless(spec, case):
    c = cert(spec, case)
    assert c.verdict == "lossless", c.summary()
    assert c.tolerance == 1e-6  # they compare in float32


@pytest.mark.parametrize(
    "spec, case",
    [
        ("examples.sglang_style:SGLangThreshold", RHEO_M1),
        ("examples.eagle_style:EagleReleaseBonusBug", RHEO_M1),
        ("examples.eagle_style:EagleReleaseBonusBug", CHAIN),
        ("examples.transformers_style:GreedyDraftChain", CHAIN),
    ],
    ids=["sglang threshold 0.5", "eagle-2 bonus bug", "eagle-2 bonus bug chain", "greedy draft, q = softmax"],
)
def test_lossy_designs_are_caught_exactly(spec, case):
    c = cert(spec, case)
    assert c.verdict == "not lossless" and c.deviation > 1e-3, c.summary()
    assert c.sequence and c.continued != pytest.approx(c.target)


@pytest.mark.parametrize(
    "spec", ["examples.transformers_style:ChainVerifier", "examples.transformers_style:EarlyStopChain"]
)
def test_chain_verifiers_are_lossless_on_chains_and_skip_trees(spec):
    assert cert(spec, CHAIN).verdict == "lossless"
    assert cert(spec, TOPK).verdict == "skipped"


class UrandomBonus:
    """Emits one token drawn from the root's target law by inverse CDF on os.urandom:
    lossless in law, but with randomness nothing intercepts."""

    follows_uniforms = False

    def verify(self, tree, target_logits, config, temperature, uniforms):
        import os

        import numpy as np

        p = np.exp(target_logits[0] - np.max(target_logits[0]))
        u = int.from_bytes(os.urandom(7), "big") / 2**56
        return {"tokens": [int(np.searchsorted(np.cumsum(p / p.sum()), u, side="right"))], "accepted": []}


class FloatCoin:
    follows_uniforms = False

    def verify(self, tree, target_logits, config, temperature, uniforms):
        import random

        return {"tokens": [int(float(random.random()) < 0.5)], "accepted": []}


@pytest.mark.parametrize(
    "obj, needle",
    [(UrandomBonus(), "randomness this check does not intercept"), (FloatCoin(), "float() of a random value")],
    ids=["os.urandom", "float(u)"],
)
def test_randomness_that_cannot_be_followed_is_reported_not_guessed(obj, needle):
    from rheo.checks.protocol.load import Implementation

    c = certify_implementation(Implementation(obj, "escape"), {**TOPK, "temperature": "1"})
    assert c.verdict == "unsupported" and needle in c.detail, c.summary()


def test_the_check_searches_and_shrinks_a_counterexample():
    impl = load_implementation("examples.sglang_style:SGLangThreshold")
    out = check_exact(impl, [RHEO_M1], search_examples=10, seed=0)
    assert out.verdict == "fail" and "not lossless (exact)" in out.detail
    ce = out.counterexample
    assert ce["check"] == "exact certification" and ce["shrunk"]
    assert ce["case"]["vocab_size"] <= RHEO_M1["vocab_size"]
    assert ce["max_abs_deviation"] > 1e-3 and ce["worst_sequence"]


def test_the_check_passes_with_the_cases_it_covered_and_fails_when_nothing_is_supported():
    impl = load_implementation("examples.transformers_style:ChainVerifier")
    out = check_exact(impl, [CHAIN, {**TOPK, "name": "topk"}])
    assert out.verdict == "pass" and "lossless (exact) on 1 cases" in out.detail
    out = check_exact(impl, [TOPK])
    assert out.verdict == "fail" and "nothing is proven" in out.detail


def test_a_crash_is_a_finding_with_its_case():
    from rheo.checks.protocol.load import Implementation

    class Crashes(FloatCoin):
        def verify(self, tree, target_logits, config, temperature, uniforms):
            raise ValueError("index out of range in my kernel")

    out = check_exact(Implementation(Crashes(), "crashes"), [{**TOPK, "name": "topk"}])
    assert out.verdict == "fail" and "failed on topk: ValueError: index out of range" in out.detail
    assert out.counterexample["case"]["policy"] == "topk"


def test_probes_leave_the_global_random_state_as_it_was():
    import random

    import numpy as np

    random.seed(5)
    np.random.seed(5)
    expected = (random.random(), np.random.random())
    random.seed(5)
    np.random.seed(5)
    cert("examples.eagle_style:EagleVerifier", TOPK)
    assert (random.random(), np.random.random()) == expected


def test_the_exact_budget_is_a_bound_past_the_cheapest_case_and_the_users():
    """--exact-budget bounds the check (issue 36 item 7): with the budget spent at once, the
    cheapest drawn case and the user's cases (given) are certified, the rest not reached."""
    impl = load_implementation("examples.transformers_style:ChainVerifier")
    small = hashed_case(3, 1, 1, policy="rheo", K=1, m=0, budget=1, beam=1, temperature="1")
    mine = {**hashed_case(3, 2, 2, policy="rheo", K=1, m=0, budget=2, beam=1, temperature="1"), "name": "mine"}
    drawn = [{**CHAIN, "name": "chain"}, {**small, "name": "small"}]
    out = check_exact(impl, [*drawn, mine], budget=0.0, given=1)
    assert out.verdict == "pass" and out.data["certified"] == 2, out.detail
    assert out.data["budget"]["not_reached"] == ["chain"] and "1 of 3 cases not reached" in out.detail


class CoinPerVisitedNode:
    """A chain verifier that draws a coin for each position it reaches: its draws change with
    the values drawn (a rejection stops them), which exact certification cannot follow."""

    follows_uniforms = False

    def supports(self, config):
        return config["K"] == 1 and config["temperature"] > 0 and config["draft_top_k"] is None

    def cycle(self, draft_logits, target_logits, config, temperature):
        import torch

        L = int(min(config["depth"], config["budget"]))
        path: tuple = ()
        for _ in range(L):
            q = torch.softmax(torch.as_tensor(draft_logits([path])[0]) / temperature, -1)
            x = int(torch.multinomial(q, 1))
            p = torch.softmax(torch.as_tensor(target_logits([path])[0]) / temperature, -1)
            if float(torch.rand(1)) > float(p[x] / q[x]):  # a coin only where the chain got to
                r = torch.clamp(p - q, min=0)
                return [*path, int(torch.multinomial(r / r.sum(), 1))]
            path = (*path, x)
        p = torch.softmax(torch.as_tensor(target_logits([path])[0]) / temperature, -1)
        return [*path, int(torch.multinomial(p, 1))]


def test_a_draw_schedule_that_changes_stops_exact_certification_at_its_first_case():
    """Issue 36 item 8: the first case refused for a changing schedule names the fix, and the
    other cases are not started (they would each search before saying the same)."""
    from rheo.checks.protocol.load import Implementation

    impl = Implementation(CoinPerVisitedNode(), "coin per visited node")
    small = hashed_case(3, 2, 2, policy="rheo", K=1, m=0, budget=2, beam=1, temperature="1")
    out = check_exact(impl, [{**CHAIN, "name": "chain"}, {**small, "name": "small"}])
    assert out.verdict == "skip", out.detail
    assert "the number of draws changes with the values drawn" in out.detail and "one fixed schedule" in out.detail
    assert "the other 1 cases were not started" in out.detail and out.data["not_started"] == ["chain"]
