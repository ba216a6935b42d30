"""The gate's check of an ``--impl`` implementation on statistical cases beyond exact reach
(``rheo.checks.cases.large``: V 16 to 1,024, depth 3 to 6, K up to 8, budgets up to 60),
judged by the first token's law and the conditional laws at frequent prefixes
(``rheo.checks.statistics.prefix_law``), plus the user's ``--cases``.
"""

from __future__ import annotations

from rheo.checks.cases.large import select_large
from rheo.checks.cases.space import Selection
from rheo.checks.gate.coverage import GREEDY_ONLY, supported_cases, with_coverage
from rheo.checks.outcome import FAMILY_ALPHA, Check, Outcome, Profile, statistical_budget
from rheo.checks.protocol.inputs import case_config
from rheo.checks.protocol.load import Implementation
from rheo.checks.statistics.prefix_law import check_prefix_law

NAME = "impl: output law, beyond exact reach"


def large_selection(impl: Implementation, level: str) -> Selection:
    """The large cases of ``level`` that ``impl`` supports, asked as it is asked for any
    case (``case_config``), and what it supports of the large pool (``select_large``)."""
    return select_large(lambda case: impl.supports(case_config(case)), level, own_design=tuple(impl.own_design))


def prefix_law_checks(
    impl: Implementation, extra_cases: list[dict] | None, stem: str, owner: str | None
) -> list[Check]:
    """The prefix-law check for a per-request implementation (none otherwise): the large
    cases of the profile's level it supports (``select_large``: the level's cases, or others
    of the same size from its slice, every value of K it supports where the quota allows:
    a verifier of several drafts a node gets those, not chains alone: ``large_selection``)
    and ``extra_cases``, ``profile.impl_prefix_cycles`` cycles per case, or sized by
    ``profile.impl_tv`` / ``profile.impl_time_budget``; skipped by a profile with none of
    the three (a ``Profile`` built without them).

    Catches: bugs that only large cases reach (index arithmetic past V = 16, deep paths,
    pools of K = 8, budgets of 60) by the law of each prefix's next token. Why not easier:
    exact certification and a chi-square over V^(D+1) whole sequences cannot run at these
    sizes, and the small cases never exercise the code paths of a large vocabulary."""
    if not impl.per_request:
        return []
    extra = list(extra_cases or [])

    def run(profile: Profile, progress) -> Outcome:
        budget = statistical_budget(profile, impl.obj)
        if not profile.impl_prefix_cycles and profile.impl_tv is None and budget is None:
            return Outcome("skip", f"the profile {profile.name!r} sizes no cycles for it (impl_prefix_cycles = 0)")
        sel = large_selection(impl, profile.matrix)
        if not sel.cases and not extra:
            if supported_cases(impl, "statistical", profile.matrix).greedy_only:
                return with_coverage(Outcome("pass", GREEDY_ONLY, data={"applicable": False}), sel, [], [])
            why = (
                f"not applicable: it supports none of the {sel.candidates} configurations beyond exact reach "
                "(V 16 to 1,024, depth 3 to 6; rheo.checks.cases.large)"
            )
            return with_coverage(Outcome("skip", why, data={"applicable": False}), sel, [], [])
        outcome = check_prefix_law(
            impl,
            sel.cases + extra,
            profile.impl_prefix_cycles,
            tv=profile.impl_tv,
            time_budget=budget,
            family_alpha=FAMILY_ALPHA,
            progress=progress,
        )
        return with_coverage(outcome, sel, sel.cases + extra, list(outcome.data.get("cases", {})))

    what = impl.provides()
    return [Check(f"{NAME} ({what})", "implementation", run, file_stem=f"{stem}-prefix-law", owner=owner)]
