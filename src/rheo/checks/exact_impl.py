"""Exact certification of an implementation, as it was importable before the checks moved
into rooms (CHANGELOG.md, 0.2.0). Thin re-exports of ``rheo.checks.exact``, where it is
documented.
"""

from __future__ import annotations

from rheo.checks.exact.certificate import CUT_WIDTH, ESCAPES, MAX_RUNS, PROBES, TOLERANCE, Certificate
from rheo.checks.exact.certify import certify_implementation
from rheo.checks.exact.check import (
    SEARCH_POOL,
    check_exact,
    counterexample,
    describe_case,
    exact_case,
    replay_exact,
    search_strategy,
)
from rheo.checks.exact.handed import handed_law

__all__ = [
    "CUT_WIDTH",
    "Certificate",
    "ESCAPES",
    "MAX_RUNS",
    "PROBES",
    "SEARCH_POOL",
    "TOLERANCE",
    "certify_implementation",
    "check_exact",
    "counterexample",
    "describe_case",
    "exact_case",
    "handed_law",
    "replay_exact",
    "search_strategy",
]
