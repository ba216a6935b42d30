"""The cases of an implementation check drawn from what it supports
(``rheo.checks.cases.space``), and the coverage each check reports with its outcome.
"""

from __future__ import annotations

from rheo.checks.cases.space import Selection, select
from rheo.checks.outcome import Outcome
from rheo.checks.protocol.inputs import case_config
from rheo.checks.protocol.load import Implementation


def supported_cases(impl: Implementation, purpose: str, level: str) -> Selection:
    """The covering set of cases for one check ("exact" or "statistical";
    ``rheo.checks.cases.space``), drawn from the configurations ``impl`` supports, at the
    matrix ``level``."""
    return select(
        lambda case: impl.supports(case_config(case)),
        purpose,
        level,
        sampling=impl.sampling_parameters,
        own_design=impl.own_design,
    )


def with_coverage(outcome: Outcome, sel: Selection, cases: list[dict], compared: list[str]) -> Outcome:
    """``outcome`` with its ``coverage`` (per dimension: covered by the ``compared`` case
    names, supported, refused) and the selection's quota, and the shortfall named in its
    detail when fewer than the quota were compared."""
    by_name = {c.get("name"): c for c in cases}
    done = [by_name[n] for n in compared if n in by_name]
    outcome.data["coverage"] = sel.coverage(done)
    outcome.data["quota"] = sel.quota
    outcome.data["configurations"] = {"asked": sel.candidates, "supported": sel.supported_configs}
    short = sel.shortfall(len(done))
    if short:
        outcome.data["shortfall"] = short
        outcome.detail += f" [{short}]"
    return outcome


GREEDY_ONLY = (
    "not applicable: greedy only (every configuration it supports has T = 0, where a cycle's law is a point "
    "mass: exact certification decides alone)"
)
