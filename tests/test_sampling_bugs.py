"""Sampling parameters under speculation (docs/spec.md §9): exact certification, on cases
drawn from the supported space of each implementation of ``examples/sampling_params.py``,
passes the verifier that applies the parameters at every position with that position's
history (its quota met), and catches each planted engine defect ("not lossless (exact)")
with a shrunk counterexample that carries the parameter the defect mishandles."""

import sys
from pathlib import Path

import pytest

from rheo.checks.exact.check import check_exact
from rheo.checks.gate.coverage import supported_cases, with_coverage
from rheo.checks.protocol.load import load_implementation
from rheo.testing.planted import PLANTED_SAMPLING_BUGS

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CORRECT = "examples.sampling_params:SamplingParamsVerifier"
SEARCH = 40  # the quick profile's Hypothesis search (impl_exact_search)


def certified(spec: str, level: str, search: int):
    """The gate's exact-certification outcome for ``spec`` at the matrix ``level``, with its
    coverage and quota (``rheo.checks.gate.checklist``'s exact check, without the gate)."""
    impl = load_implementation(spec)
    sel = supported_cases(impl, "exact", level)
    outcome = check_exact(impl, sel.cases, search, 0)
    compared = [c["case_name"] for c in outcome.data.get("cases", []) if c["verdict"] in ("lossless", "not lossless")]
    return with_coverage(outcome, sel, sel.cases, compared), sel


def test_the_verifier_that_applies_the_parameters_per_position_is_lossless_with_its_quota_met():
    outcome, sel = certified(CORRECT, "quick", SEARCH)
    assert outcome.verdict == "pass", outcome.detail
    assert outcome.detail.startswith("lossless (exact)")
    assert "shortfall" not in outcome.data, outcome.data["shortfall"]
    assert outcome.data["certified"] >= sel.quota
    assert any(c.get("target_logits") is not None for c in sel.cases)  # the parameters were drawn


@pytest.mark.parametrize("name", list(PLANTED_SAMPLING_BUGS))
def test_each_planted_sampling_bug_is_not_lossless_exactly_with_a_minimal_counterexample(name):
    spec = f"examples.sampling_params:{name}"
    outcome, _ = certified(spec, "smoke", SEARCH)
    assert outcome.verdict == "fail" and outcome.detail.startswith("not lossless (exact)"), outcome.detail
    found = outcome.counterexample
    assert found["verdict"] == "not lossless (exact)" and found["sequence"]
    declared = load_implementation(spec).obj.sampling_parameters
    assert any(found["case"].get(p) is not None for p in declared), found["case"]  # the defect needs them
    assert found["deviation"] > 1e-6
