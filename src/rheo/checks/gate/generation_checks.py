"""The gate's checks of whole generations (the protocol's ``generate``), listed by
``checklist.impl_checks`` for an implementation that has it: exact certification of every
draw (``rheo.checks.exact.generation``) and the n-token output law, statistically
(``rheo.checks.statistics.generation_law``), each on ``generation_cases(profile.matrix)``
plus the user's ``--cases`` (each with its ``n_tokens``, default depth + 1).
"""

from __future__ import annotations

from rheo.checks.cases.generations import stop_cases
from rheo.checks.exact.generation import check_generation_exact
from rheo.checks.outcome import FAMILY_ALPHA, Check, Outcome, Profile
from rheo.checks.protocol.load import Implementation
from rheo.checks.statistics.generation_law import check_generation_law

GENERATION_SHARE = 4  # generations per case: the profile's cycles per case (--cycles) over this, at least 1,000


def generations_per_case(profile: Profile) -> int:
    """A generation runs several cycles: the statistical check samples ``impl_cycles /
    GENERATION_SHARE`` of them per case (5,000 in quick), at least 1,000."""
    return max(1000, profile.impl_cycles // GENERATION_SHARE)


def generation_checks(
    impl: Implementation, extra_cases: list[dict] | None, stem: str, owner: str | None
) -> list[Check]:
    """The two checks of ``generate`` ([] for an implementation without it).

    Catch: state carried wrongly from one cycle to the next (a KV cache not rolled back to
    the accepted prefix, the next root after a bonus token, an adaptive draft length that
    peeks at the target), exactly on small generations and by the n-token law beyond. Why
    not easier: single-cycle checks restart from a fresh root every cycle, so a bug in the
    carried state never shows there."""
    if not impl.runs_generations:
        return []
    extra = list(extra_cases or [])

    def with_stops(level: str) -> list[dict]:
        """The user's cases, after the stopping generations for an implementation that
        declares ``stops = True`` (``stop_cases``)."""
        return (stop_cases(level) if getattr(impl.obj, "stops", False) else []) + extra

    def exact(profile: Profile, progress) -> Outcome:
        return check_generation_exact(impl, profile.matrix, with_stops(profile.matrix), progress=progress)

    def law(profile: Profile, progress) -> Outcome:
        generations = generations_per_case(profile)
        return check_generation_law(
            impl,
            generations,
            FAMILY_ALPHA,
            level=profile.matrix,
            extra_cases=with_stops(profile.matrix),
            progress=progress,
        )

    what = impl.provides()
    return [
        Check(
            f"impl: exact certification, whole generations ({what})",
            "implementation",
            exact,
            file_stem=f"{stem}-exact-generations",
            owner=owner,
        ),
        Check(
            f"impl: output law, whole generations ({what})",
            "implementation",
            law,
            file_stem=f"{stem}-output-law-generations",
            owner=owner,
        ),
    ]
