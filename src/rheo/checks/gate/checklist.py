"""The gate's check lists: ``gate_checks`` (the reference, its controls and the fastpath)
and ``impl_checks`` (what ``--impl`` runs on an implementation, chosen by what it
provides).
"""

from __future__ import annotations

import dataclasses

from rheo.checks.cases.corpus import CONTROLS
from rheo.checks.differential.decision_equality import check_decisions
from rheo.checks.exact.check import check_exact
from rheo.checks.gate.coverage import GREEDY_ONLY, supported_cases, with_coverage
from rheo.checks.gate.fastpath_checks import (
    fast_calibration_check,
    fast_cycle_law_check,
    fast_decisions_check,
    fast_ties_check,
    real_model_check,
)
from rheo.checks.gate.generation_checks import generation_checks
from rheo.checks.gate.prefix_law_checks import prefix_law_checks
from rheo.checks.gate.reference_checks import MATRIX_FAMILIES, control_check, exact_matrix_check, paper_example_check
from rheo.checks.gate.run import impl_stem, search_seed
from rheo.checks.outcome import FAMILY_ALPHA, Check, Outcome, Profile, statistical_budget
from rheo.checks.statistics.cycle_law import check_cycle_law
from rheo.checks.statistics.output_law import check_output_law


def gate_checks(profile: Profile | None = None) -> list[Check]:
    checks = [exact_matrix_check(f) for f in MATRIX_FAMILIES]
    checks.append(paper_example_check())
    checks += [control_check(c) for c in CONTROLS]
    checks += [fast_decisions_check(), fast_ties_check(), fast_cycle_law_check(), fast_calibration_check()]
    if profile is not None and profile.real_first:
        checks.append(real_model_check())
    return checks


def impl_checks(impl, extra_cases: list[dict] | None = None) -> list[Check]:
    """The checks of an ``--impl`` implementation (``rheo.checks.protocol``): decision
    equality (sameness with the reference; not listed for ``follows_uniforms = False``), exact
    certification (``rheo.checks.exact``: losslessness, exactly, on the profile's level
    of ``rheo.checks.cases.matrix`` plus ``extra_cases``, then a Hypothesis search), the
    output law (losslessness, on the profile's level of ``rheo.checks.cases.matrix`` plus
    ``extra_cases``, the user's ``--cases``), and the cycle law only for implementations
    that declare ``implements_spec = True`` (not listed otherwise: a lossless
    implementation of another algorithm has another cycle law, and a check that could
    only be skipped would make --strict fail). Decision equality is likewise not listed
    for an implementation that draws its own randomness (``follows_uniforms = False``).

    What each would catch, and why an easier assertion would not:
    - decision equality: a departure from the specified algorithm (a tie broken by token
      id, a uniform reused); shrunk to one decision. A lossless implementation of another
      design may differ here and still pass the rest, so it proves sameness only.
    - exact certification: any loss, however small (a residual not renormalised, a
      parameter applied with the wrong history: the planted bugs of
      ``examples/sampling_params.py``), as an exact deviation with the sequence that shows
      it; a chi-square at the same cost detects only deviations above its TV.
    - output law: loss beyond exact reach (randomness the enumerator cannot follow,
      float32 thresholds), at a stated detectable TV; exact certification alone cannot see
      what it cannot enumerate.
    - cycle law: an implementation claiming the spec's algorithm whose cycle law differs
      while its output law does not (a bug that cancels in the continuation)."""
    extra = list(extra_cases or [])

    def decisions(profile: Profile, progress) -> Outcome:
        return check_decisions(
            impl, profile.impl_examples, search_seed(profile), min_compared=profile.impl_min_compared, progress=progress
        )

    def output_law(profile: Profile, progress) -> Outcome:
        sel = supported_cases(impl, "statistical", profile.matrix)
        if profile.impl_cases_only:  # --cases-only: the user's cases alone
            sel = dataclasses.replace(sel, cases=[])
        if sel.greedy_only and not extra:
            return with_coverage(Outcome("pass", GREEDY_ONLY, data={"applicable": False}), sel, [], [])
        outcome = check_output_law(
            impl,
            profile.impl_cycles,
            FAMILY_ALPHA,
            cases=sel.cases,
            extra_cases=extra,
            progress=progress,
            tv=profile.impl_tv,
            time_budget=statistical_budget(profile, impl.obj),
        )
        return with_coverage(outcome, sel, sel.cases + extra, list(outcome.data.get("cases", {})))

    def cycle_law(profile: Profile, progress) -> Outcome:
        return check_cycle_law(impl, profile.impl_cycles, FAMILY_ALPHA, deep=profile.name == "deep", progress=progress)

    def exact(profile: Profile, progress) -> Outcome:
        sel = supported_cases(impl, "exact", profile.matrix)
        if profile.impl_cases_only:  # --cases-only: the user's cases alone, no Hypothesis search
            sel = dataclasses.replace(sel, cases=[])
        cases = sel.cases + extra
        outcome = check_exact(
            impl,
            cases,
            0 if profile.impl_cases_only else profile.impl_exact_search,
            search_seed(profile),
            progress=progress,
            budget=profile.impl_exact_budget,
            given=len(extra),
        )
        compared = [
            c["case_name"] for c in outcome.data.get("cases", []) if c["verdict"] in ("lossless", "not lossless")
        ]
        return with_coverage(outcome, sel, cases, compared)

    def output_law_batched(profile: Profile, progress) -> Outcome:
        from rheo.checks.statistics.batched import check_output_law_batched  # needs torch

        return check_output_law_batched(
            impl, profile.impl_batched_cycles, FAMILY_ALPHA, level=profile.matrix, extra_cases=extra, progress=progress
        )

    def large_vocabulary(profile: Profile, progress) -> Outcome:
        from rheo.checks.statistics.batched import check_large_vocabulary  # needs torch

        return check_large_vocabulary(impl, profile.impl_large_vocab_cycles, FAMILY_ALPHA, progress=progress)

    what, (stem, owner) = impl.provides(), impl_stem(impl.name)
    checks = []
    if impl.batched:
        checks += [
            Check(
                f"impl: output law, batched ({what})",
                "implementation",
                output_law_batched,
                needs_torch=True,
                file_stem=f"{stem}-output-law-batched",
                owner=owner,
            ),
            Check(
                f"impl: large vocabulary, batched ({what})",
                "implementation",
                large_vocabulary,
                needs_torch=True,
                file_stem=f"{stem}-large-vocabulary",
                owner=owner,
            ),
        ]
    checks += generation_checks(impl, extra, stem, owner)
    if not impl.per_request:
        return checks
    if impl.follows_uniforms:
        checks.append(
            Check(
                f"impl: decision equality ({what})",
                "implementation",
                decisions,
                file_stem=f"{stem}-decision-equality",
                owner=owner,
            )
        )
    checks += [
        Check(f"impl: exact certification ({what})", "implementation", exact, file_stem=f"{stem}-exact", owner=owner),
        Check(f"impl: output law ({what})", "implementation", output_law, file_stem=f"{stem}-output-law", owner=owner),
    ]
    checks += prefix_law_checks(impl, extra, stem, owner)
    if impl.implements_spec:
        checks.append(
            Check(f"impl: cycle law ({what})", "implementation", cycle_law, file_stem=f"{stem}-cycle-law", owner=owner)
        )
    return checks
