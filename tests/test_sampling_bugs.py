"""Sampling parameters under speculation (docs/spec.md §9): exact certification, on cases
drawn from the supported space of each implementation of ``examples/sampling_params.py``
(``rheo.checks.gate.coverage.supported_cases``, as ``rheo gate --impl`` draws them), passes
the verifier that applies the parameters at every position with that position's history,
with its quota met, and reports each planted engine defect "not lossless (exact)" with its
smallest failing case and sequence."""

import sys
from pathlib import Path

import pytest

from rheo.checks.cases.sampling import sampling_names
from rheo.checks.exact.certify import certify_implementation
from rheo.checks.exact.check import check_exact, cost
from rheo.checks.gate.coverage import supported_cases, with_coverage
from rheo.checks.protocol.load import load_implementation
from rheo.reference.sampling import PARAMETERS
from rheo.testing.planted import PLANTED_SAMPLING_BUGS

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CORRECT = "examples.sampling_params:SamplingParamsVerifier"


def test_the_verifier_that_applies_the_parameters_per_position_is_lossless_with_its_quota_met():
    """The gate's exact check at the smoke level (no search: it draws no sampling cases).
    The sampling cases are those of the quick level (each parameter alone and with each
    other); quick adds matrix cases without parameters (`rheo gate`: docs/gate.md)."""
    impl = load_implementation(CORRECT)
    assert impl.sampling_parameters == set(PARAMETERS)
    sel = supported_cases(impl, "exact", "smoke")
    outcome = check_exact(impl, sel.cases)
    compared = [c["case_name"] for c in outcome.data["cases"] if c["verdict"] in ("lossless", "not lossless")]
    outcome = with_coverage(outcome, sel, sel.cases, compared)
    assert outcome.verdict == "pass" and outcome.detail.startswith("lossless (exact)"), outcome.detail
    assert "shortfall" not in outcome.data and len(compared) >= sel.quota
    drawn = {p for c in sel.cases for p in sampling_names(c)}
    assert drawn == set(PARAMETERS)  # every parameter was drawn, and certified
    assert all(outcome.data["coverage"][p]["covered"] == ["off", "on"] for p in PARAMETERS)


def test_a_logit_bias_on_the_draft_side_alone_is_lossless():
    """Why the draft-side bias bug also leaves the bias out of the target's verified
    positions: biasing the draft alone is another draft, and losslessness holds for any."""
    impl = load_implementation("examples.sampling_params:DraftOnlyLogitBias")
    cases = [
        c for c in supported_cases(impl, "exact", "smoke").cases if c.get("logit_bias") and c["temperature"] != "0"
    ]
    gaps = []
    for drawn in cases:  # a uniform draft, which the bias reorders (a drawn draft's zeros it cannot move)
        case = {**drawn, "draft": {"*": [f"1/{drawn['vocab_size']}"] * drawn["vocab_size"]}}
        biased = certify_implementation(impl, case)
        assert biased.verdict == "lossless", biased.summary()
        plain = certify_implementation(load_implementation(CORRECT), case)
        assert plain.verdict == "lossless"
        gaps.append(max(abs(biased.law.get(o, 0.0) - plain.law.get(o, 0.0)) for o in set(biased.law) | set(plain.law)))
    # and the bias does reach the draft: on some case the cycle law is not the unbiased verifier's
    # (a Top-K tree holding the whole vocabulary drafts every token whatever the bias)
    assert max(gaps) > 1e-3, gaps


@pytest.mark.parametrize("name", list(PLANTED_SAMPLING_BUGS))
def test_each_planted_sampling_bug_is_not_lossless_exactly_with_its_smallest_counterexample(name):
    """On the drawn cases that carry sampling parameters (the others certify the loop
    implementation, untouched by every defect), cheapest first, so that the case the check
    reports, its first failing one, is the smallest."""
    spec = f"examples.sampling_params:{name}"
    impl = load_implementation(spec)
    sel = supported_cases(impl, "exact", "smoke")
    cases = sorted((c for c in sel.cases if sampling_names(c)), key=cost)
    assert cases and all(set(sampling_names(c)) <= impl.sampling_parameters for c in cases)
    outcome = check_exact(impl, cases)
    assert outcome.verdict == "fail" and outcome.detail.startswith("not lossless (exact)"), outcome.detail
    found = outcome.counterexample
    assert found["check"] == "exact certification" and found["implementation"] == spec and not found["shrunk"]
    assert found["worst_sequence"] and found["max_abs_deviation"] > 1e-6  # far above the 1e-9 tolerance
    bad = [c for c in outcome.data["cases"] if c["verdict"] == "not lossless"]
    assert found["case_name"] == bad[0]["case_name"]
    assert cost(found["case"]) == min(cost(c) for c in cases if c["name"] in {b["case_name"] for b in bad})
    print(f"{name}: {outcome.detail}")
