"""The gate's check lists: ``gate_checks`` (the reference, its controls and the fastpath)
and ``impl_checks`` (what ``--impl`` runs on an implementation, chosen by what it
provides), and ``select_only``, the checks ``rheo gate --only TEXT`` names.
"""

from __future__ import annotations

import dataclasses

from rheo.checks.cases.composition import composition_cases
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
from rheo.checks.gate.mixed_checks import mixed_checks
from rheo.checks.gate.prefix_law_checks import prefix_law_checks
from rheo.checks.gate.reference_checks import MATRIX_FAMILIES, control_check, exact_matrix_check, paper_example_check
from rheo.checks.gate.run import impl_stem, search_seed
from rheo.checks.gate.vocab_checks import vocab_checks
from rheo.checks.outcome import FAMILY_ALPHA, Check, Outcome, Profile, statistical_budget
from rheo.checks.protocol.inputs import case_config
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
        composed = [] if profile.impl_cases_only else composition_cases()
        composed = [c for c in composed if impl.supports(case_config(c))]
        cases = sel.cases + composed + extra
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
    checks += mixed_checks(impl, stem, owner)
    checks += vocab_checks(impl, stem, owner)
    if impl.implements_spec:
        checks.append(
            Check(f"impl: cycle law ({what})", "implementation", cycle_law, file_stem=f"{stem}-cycle-law", owner=owner)
        )
    return checks


# --only TEXT: the rules, narrowest first; the first that names any check decides
ONLY_RULES = ("name", "alias", "leading words", "substring")
# short forms in wide use, each naming one kind of check (by its name without "impl: ")
ONLY_ALIASES = {"exact": "exact certification", "beyond exact reach": "output law, beyond exact reach"}


def _spelled(text: str) -> str:
    return " ".join(text.lower().split())


def name_forms(name: str) -> tuple[str, str, str]:
    """The names a check answers to under ``--only`` (lower case): in full, the part before
    " (", and that part without "impl: ".

    >>> name_forms("impl: output law, beyond exact reach (whole cycles)")[1:]
    ('impl: output law, beyond exact reach', 'output law, beyond exact reach')
    """
    full = _spelled(name)
    head = full.split(" (", 1)[0]
    return full, head, head.removeprefix("impl: ")


def only_rule(text: str, name: str) -> str | None:
    """The first of ``ONLY_RULES`` by which ``--only text`` names the check ``name`` (case
    and runs of spaces aside), None if none: "name", one of its ``name_forms``; "alias", an
    ``ONLY_ALIASES`` key for its name without "impl: "; "leading words", the start of its name
    (with or without "impl: ") up to a word's end ("control" for "control: ...", "output law ("
    for "impl: output law (...)"); "substring", anywhere in its name (the old form)."""
    t = _spelled(text)
    full, head, short = name_forms(name)
    if t in (full, head, short):
        return "name"
    if ONLY_ALIASES.get(t) == short:
        return "alias"
    for form in (full, full.removeprefix("impl: ")):
        if t and form.startswith(t) and not (t[-1].isalnum() and form[len(t) : len(t) + 1].isalnum()):
            return "leading words"
    return "substring" if t in full else None


def select_only(names: list[str], text: str) -> tuple[list[str], str | None]:
    """The check names ``--only text`` selects, and by which rule (``only_rule``; None:
    it names none): those named by the narrowest rule that names any, so an exact name
    never also runs the checks it is part of.

    >>> names = ["impl: exact certification (verifier)", "impl: output law (verifier)",
    ...          "impl: output law, beyond exact reach (verifier)"]
    >>> select_only(names, "output law")
    (['impl: output law (verifier)'], 'name')
    >>> select_only(names, "exact")
    (['impl: exact certification (verifier)'], 'alias')
    >>> select_only(names, "output")
    (['impl: output law (verifier)', 'impl: output law, beyond exact reach (verifier)'], 'leading words')
    >>> select_only(names, "beyond exact")
    (['impl: output law, beyond exact reach (verifier)'], 'substring')
    >>> select_only(["exact: topk", "control: paper {A,B,C}, constant proxy 1/4"], "exact")
    (['exact: topk'], 'leading words')
    """
    rules = [only_rule(text, n) for n in names]
    found = [r for r in rules if r is not None]
    if not found:
        return [], None
    how = min(found, key=ONLY_RULES.index)
    return [n for n, r in zip(names, rules) if r == how], how


def only_note(text: str, matched: list[str]) -> str:
    """The stderr line of an ``--only`` that named no check exactly and fell back to the
    substring form: what it matched, and the exact name that selects just one."""
    exact = name_forms(matched[0])[2]
    which = f"the {len(matched)} checks" if len(matched) > 1 else "the check"
    return (
        f"rheo gate: --only {text!r} names no check exactly; {which} whose name contains it: "
        f"{'; '.join(matched)} (an exact name selects just one, e.g. --only {exact!r})"
    )
