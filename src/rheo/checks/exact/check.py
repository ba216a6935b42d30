"""The gate's exact-certification check: every case certified (in parallel pieces,
``rheo.checks.parallel``), then a Hypothesis search over small supported cases for one the
implementation is not lossless on, shrunk; ``replay_exact`` reruns a saved certificate.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from rheo.checks import parallel
from rheo.checks.cases.corpus import shrunk_search
from rheo.checks.cases.sampling import masked_prefix, sampling_configs, with_logits
from rheo.checks.cases.space import candidate_configs
from rheo.checks.cases.strategies import cases_from_configs, config_pool
from rheo.checks.exact.budget import beyond_reach, case_clock, size
from rheo.checks.exact.certificate import MAX_RUNS, TOLERANCE, Certificate
from rheo.checks.exact.certify import certify_implementation, reference_tokens
from rheo.checks.outcome import Outcome
from rheo.checks.protocol.example_tree import path_line, with_example_tree
from rheo.checks.protocol.inputs import case_config, case_params, law_instance
from rheo.checks.protocol.judged import composition_words, judged_instance
from rheo.checks.protocol.load import Implementation, implementation_of, shipped
from rheo.checks.protocol.watch import describe
from rheo.progress import Meter

SEARCH_POOL = 600  # configurations drawn before the search; the small ones the implementation supports are searched
EXACT_MINIMUM = 1  # drawn cases always certified (the cheapest), whatever the budget: the budget is a bound
CASE_MINIMUM = 30.0  # seconds a case certified whatever the budget may take at least (its own bound: the budget)


def cost(case: dict) -> int:
    """A case's rough enumeration size, to certify the cheapest first under a budget: V to the
    number of sampled levels, times K."""
    return int(case["vocab_size"]) ** int(min(case["depth"], case.get("budget") or case["depth"])) * int(case["K"])


def search_strategy(impl: Implementation, seed: int = 0):
    """Small cases for the Hypothesis search, drawn only from configurations the
    implementation supports: the same pool the gate's cases come from
    (``rheo.checks.cases.space.candidate_configs``) and ``SEARCH_POOL`` random ones
    (``config_pool``), where V <= 4, K <= 3 and depth <= 2 (every policy, m, beam, budget,
    T in {0, 1/3, 1/2, 1, 3/2}, sparse on/off, target filters; half with dyadic draft laws,
    so exact score ties are common), simplest first. None when it supports none of them."""
    pool = config_pool(seed, SEARCH_POOL, candidate_configs())
    small = [
        c for c in pool if c["vocab_size"] <= 4 and c["K"] <= 3 and c["depth"] <= 2 and impl.supports(case_config(c))
    ]
    declared = impl.sampling_parameters  # and the sampling cases it declares (docs/spec.md §9)
    sampled = [c for c in sampling_configs(declared) if impl.supports(case_config(c))] if declared else []
    if not small and not sampled:
        return None
    options = [cases_from_configs(small), cases_from_configs(small, dyadic_draft=True)] if small else []
    if sampled:
        options.append(cases_from_configs(sampled).map(with_logits).filter(lambda c: masked_prefix(c) is None))
    return st.one_of(*options)


def describe_case(case: dict) -> str:
    """The configuration of a case dict in one line: every key that is set (``harness.describe``)."""
    return describe(case["vocab_size"], case_params(case))


def counterexample(impl: Implementation, cert: Certificate, shrunk: bool) -> dict[str, Any]:
    """The counterexample file of a case certified not lossless, with a draft tree of one
    cycle that begins its worst sequence (``worst_tree``) where the implementation builds or
    verifies trees."""
    payload = {
        "check": "exact certification",
        "implementation": impl.name,
        "shrunk": shrunk,
        **cert.to_json(),
        "verdict": "not lossless (exact)",  # after the certificate's own "not lossless"
        "case": cert.case,
        "output_law": {" ".join(map(str, o)): p for o, p in sorted(cert.law.items())},
        "replay": f"rheo gate --impl {impl.name} --replay FILE",
        "witness": cert.witness,  # what the law was computed from (rheo.checks.witness replays it)
    }
    if cert.sequence is None:
        return payload
    return with_example_tree(payload, impl, judged_instance(impl, law_instance(cert.case)), cert.sequence)


NO_OPS = {"target_top_p": "1", "target_min_p": "0"}  # settings that do nothing at these values


def without_no_ops(impl: Implementation, case: dict, max_runs: int = MAX_RUNS) -> dict:
    """A shrunk case without the settings that do nothing (a target_top_p of 1, a min_p of
    0, a target_top_k or draft_top_k of at least V), when the implementation is still not
    lossless without them (an implementation may mishandle exactly such a setting)."""
    drop = [k for k, v in NO_OPS.items() if case.get(k) is not None and Fraction(str(case[k])) == Fraction(v)]
    drop += [k for k in ("target_top_k", "draft_top_k") if case.get(k) is not None and case[k] >= case["vocab_size"]]
    if not drop:
        return case
    simpler = {k: v for k, v in case.items() if k not in drop}
    return simpler if certify_implementation(impl, simpler, max_runs).verdict == "not lossless" else case


_SCHEDULE_REFUSED: list[str] = []  # this process's first refusal for a draw schedule that changes (then: stop)
_REPORT: list[Callable[[str], None] | None] = [None]  # where a case's own progress lines go (this process)


def exact_case(
    ref: Implementation | str, case: dict, max_runs: int, deadline: float | None = None, alone: float | None = None
) -> Certificate:
    """One case of the exact-certification check (a piece of work: rheo.checks.parallel); past
    ``deadline`` (``time.time()``), a case it may leave out is not started ("not reached"),
    nor is any case after one whose draws changed with the values drawn (in the same process:
    the implementation draws by its values, and every case would say so after its own search).
    A case started is bounded too (``rheo.checks.exact.budget``): by ``deadline``, or, for a
    case certified whatever the budget (``deadline`` None), by ``alone`` seconds of its own;
    past it the case is "outgrown", named with its size and the runs done."""
    if deadline is not None and time.time() > deadline:
        return Certificate(case, "not reached", "not reached within the exact-certification budget")
    if _SCHEDULE_REFUSED:
        return Certificate(case, "not reached", f"not started: {_SCHEDULE_REFUSED[0]}")
    until = deadline if deadline is not None else (None if alone is None else time.time() + alone)
    reason = "stopped where the check's exact budget ended" if deadline is not None else ""
    impl = implementation_of(ref)
    with case_clock(str(case.get("name", describe_case(case))), until, _REPORT[0], reason):
        cert = certify_implementation(impl, case, max_runs)
    if cert.verdict in ("lossless", "not lossless"):
        cert.reference_tokens_per_cycle = reference_tokens(case)
    if cert.schedule_changed:
        _SCHEDULE_REFUSED.append(f"on {cert.name} the number of draws changed with the values drawn")
    return cert


def check_exact(
    impl: Implementation,
    cases: list[dict],
    search_examples: int = 0,
    seed: int | None = 0,
    max_runs: int = MAX_RUNS,
    progress: Callable[[str], None] | None = None,
    budget: float | None = None,
    given: int = 0,
):
    """Certify the implementation exactly on ``cases``; then let Hypothesis search
    ``search_examples`` small cases for one it is not lossless on and shrink it. With
    ``budget`` (seconds), the cheapest case (``EXACT_MINIMUM``) and the last ``given`` ones
    (the user's ``--cases``: asked for by name) are certified first and always; the others,
    cheapest first, are started only while the budget lasts (the rest are "not reached",
    named in the detail), and the search only if time is left. Every case is bounded too
    (``rheo.checks.exact.budget``): one started while the budget lasts stops when it ends, one
    certified always stops after the budget of its own (at least ``CASE_MINIMUM`` seconds),
    and a case that stops so is skipped as "outgrown", named with its size and the runs done.
    Cheapest means the least ``cost``, or, for an implementation that draws its own trees, the
    fewest tree orders (``budget.size``); such an implementation whose cases hold trees the
    enumeration may not afford is told so before any case starts (``budget.beyond_reach``).
    Each certified case carries its tokens per cycle and acceptance rate, and the reference's
    tokens per cycle on the same laws; a verifier that accepts no draft on any case says so
    in the verdict ("lossless (exact), but accepts no draft")."""
    _SCHEDULE_REFUSED.clear()
    meter = Meter(f"exact certification ({parallel.current().description})", len(cases), progress, unit="cases")
    t0 = time.time()
    deadline = None if budget is None else t0 + budget
    own = _draws_own_trees(impl)  # its enumeration grows with every node slot's children
    notice = beyond_reach(cases) if own else None  # said before any case starts
    if notice and progress:
        progress(f"  exact certification: {notice}")
    _REPORT[0] = progress
    order = sorted(range(len(cases)), key=lambda i: (size(cases[i])[0], cost(cases[i])) if own else cost(cases[i]))
    users = list(range(len(cases) - given, len(cases))) if given else []
    leading = users + [i for i in order[:EXACT_MINIMUM] if i not in users]
    always = set(leading)
    run_order = leading + [i for i in order if i not in always]
    alone = None if budget is None else max(budget, CASE_MINIMUM)
    calls = [(shipped(impl), cases[i], max_runs, None if i in always else deadline, alone) for i in run_order]
    try:
        done_certs: list[Certificate] = parallel.current().map(exact_case, calls, lambda i: meter.advance())
    finally:
        _REPORT[0] = None
    meter.close()
    by_index = dict(zip(run_order, done_certs))
    certs = [by_index[i] for i in range(len(cases))]
    if progress:
        for i, cert in enumerate(certs, 1):
            if cert.verdict not in ("lossless", "skipped"):
                progress(f"  exact {i}/{len(cases)}: {cert.summary()}")
    done = [c for c in certs if c.verdict in ("lossless", "not lossless")]
    bad = [c for c in certs if c.verdict == "not lossless"]
    refused = [c for c in certs if c.verdict == "unsupported"]
    stopped = [c for c in certs if c.verdict == "not reached" and c.detail.startswith("not started")]
    late = [c for c in certs if c.verdict == "not reached" and c not in stopped]
    grown = [c for c in certs if c.verdict == "outgrown"]
    data: dict[str, Any] = {
        "cases": [c.to_json() for c in certs if c.verdict not in ("skipped", "not reached")],
        "certified": len(done),
        "unsupported_configurations": sum(c.verdict == "skipped" for c in certs),
        "runs": sum(c.runs for c in certs),
    }
    if notice:
        data["beyond_reach"] = notice
    if grown:
        data["outgrown"] = {c.name: c.detail for c in grown}
    if budget is not None:
        data["budget"] = {"seconds": budget, "not_reached": [c.name for c in late]}
    found = None
    if search_examples and deadline is not None and time.time() > deadline:
        data["search"] = {"examples": search_examples, "seed": seed, "found": False, "not_run": "budget spent"}
        search_examples = 0
    if search_examples:
        cut_short = [0]  # examples stopped by the check's budget: not searched

        def lossy(case: dict) -> bool:
            with case_clock(describe_case(case), deadline, None):  # bounded by the check's budget
                verdict = certify_implementation(impl, case, max_runs).verdict
            cut_short[0] += verdict == "outgrown"
            return verdict == "not lossless"

        strategy = search_strategy(impl)
        if strategy is not None:
            found, seed = shrunk_search(strategy, lossy, search_examples, seed)
            data["search"] = {"examples": search_examples, "seed": seed, "found": found is not None}
            if cut_short[0]:
                data["search"]["cut_short"] = cut_short[0]
    law_words = composition_words(impl, [c.case for c in certs])
    if law_words:
        data["target_law"] = law_words
    crashed = [c for c in certs if c.verdict == "crashed"]
    crashes = [
        {"check": "exact certification", "implementation": impl.name, **c.to_json(), "case": c.case} for c in crashed
    ]
    if crashed:
        data["crashed"] = [c.name for c in crashed]
    also = ""
    if crashed:
        also = (
            f"; the implementation also failed on {len(crashed)} case(s), first {crashed[0].name}: {crashed[0].detail}"
        )
    if crashed and found is None and not bad:
        first = crashed[0]
        return Outcome("fail", f"the implementation failed on {first.name}: {first.detail}", crashes[0], data)
    if found is not None or bad:
        if found is not None:
            found = without_no_ops(impl, found, max_runs)
        if found is not None:
            cert = certify_implementation(impl, found, max_runs)
        else:
            cert = min(bad, key=lambda c: cost(c.case))  # the smallest failing case
        where = "shrunk by Hypothesis" if found is not None else f"matrix case {cert.name}"
        line = (
            f"not lossless (exact): deviation {cert.deviation:.3g} > tolerance {cert.tolerance:g} "
            f"({cert.tolerance_from}) at sequence {cert.sequence} (continued {cert.continued:.6g}, target "
            f"{cert.target:.6g}); {where}: {describe_case(cert.case)}; {cert.runs} runs, {cert.seconds:.2f} s"
            + _unseen_rounding(cert)
        )
        payload = counterexample(impl, cert, found is not None)
        if "worst_tree" in payload:
            line += f"; one cycle that begins it: {path_line(payload['worst_tree'])}"
        if law_words:
            line += f"; {law_words}"
        cert.detail = line
        if crashes:  # both findings: the lossy law first, the crashes beside it
            payload["also_crashed"] = crashes
        return Outcome("fail", line + also, payload, data)
    if refused:
        rest = f"; the other {len(stopped)} cases were not started: fix the draw schedule first" if stopped else ""
        if stopped:
            data["not_started"] = [c.name for c in stopped]
        besides = ""
        if done:  # what it did certify, and why the rest stopped
            besides = f"; {len(done)} of {len(cases)} cases certified lossless (exact) besides"
            if late:
                besides += f", {len(late)} not reached within the {budget:g} s budget"
            if grown:
                besides += f", {len(grown)} outgrown"
        return Outcome(
            "skip",
            f"could not be followed exactly on {refused[0].name}: {refused[0].detail}{rest}; "
            f"the output-law check decides{besides}",
            data=data,
        )
    if not done and grown:
        return Outcome(
            "skip",
            f"every case certification started outgrew its bound ({len(grown)}; first {grown[0].name}: "
            f"{grown[0].detail}); --exact-budget raises it; the output-law check decides",
            data=data,
        )
    if not done:
        return Outcome("fail", f"no case of the {len(cases)} was supported: nothing is proven", data=data)
    worst = max(done, key=lambda c: c.deviation or 0.0)
    searched = ""
    if late:
        searched = (
            f"; {len(late)} of {len(cases)} cases not reached within the {budget:g} s budget (--exact-budget raises it)"
        )
    if grown:
        named = "; ".join(f"{c.name} ({c.detail})" for c in grown[:3]) + ("; ..." if len(grown) > 3 else "")
        searched += f"; {len(grown)} case{'s' if len(grown) > 1 else ''} skipped, outgrown: {named}"
    if data.get("search", {}).get("not_run"):
        searched += "; the Hypothesis search not run: the budget was spent"
    elif data.get("search", {}).get("cut_short"):
        searched += (
            f"; a Hypothesis search of {search_examples} small cases (seed {seed}) found none lossy, "
            f"{data['search']['cut_short']} of them cut short by the budget"
        )
    elif "search" in data:
        searched += f"; a Hypothesis search of {search_examples} small cases (seed {seed}) found none lossy"
    names = ", ".join(c.name for c in done[:6]) + (", ..." if len(done) > 6 else "")
    lowest = min(done, key=lambda c: c.precision.bits)
    data["tolerance"], data["tolerance_from"] = lowest.tolerance, lowest.tolerance_from
    accepts, figures = acceptance_words(done)
    data["accepts_no_draft"] = not accepts
    return Outcome(
        "pass",
        f"lossless (exact) on {len(done)} cases ({names}){'' if accepts else ', but accepts no draft'}: "
        f"{figures}; "
        f"largest deviation {worst.deviation:.2g}{worst.rounding} (tolerance {worst.tolerance:g}, "
        f"{worst.tolerance_from}), {data['runs']} runs, {sum(c.seconds for c in done):.1f} s{searched}"
        + (f"; {law_words}" if law_words else ""),
        data=data,
    )


def acceptance_words(certs: list[Certificate]) -> tuple[bool, str]:
    """(whether any case accepts a draft, the tokens per cycle of ``certs`` in words: their
    span and the reference's on the same laws). A verifier whose every cycle emits one token
    (``tokens_per_cycle`` 1 on every case) is lossless only by never accepting a draft."""
    taus = [c.tokens_per_cycle for c in certs if c.tokens_per_cycle is not None]
    if not taus:
        return True, "tokens per cycle not known"
    refs = [c.reference_tokens_per_cycle for c in certs if c.reference_tokens_per_cycle is not None]

    def span(xs: list[float]) -> str:
        lo, hi = f"{min(xs):.3g}", f"{max(xs):.3g}"
        return lo if lo == hi else f"{lo} to {hi}"

    accepts = max(taus) > 1 + 1e-9
    words = f"{span(taus)} tokens per cycle" + (f" (the reference on the same laws: {span(refs)})" if refs else "")
    if not accepts:
        words = f"every cycle emits one token, no draft accepted on any case; {words}"
    return accepts, words


def _draws_own_trees(impl: Implementation) -> bool:
    """Whether the implementation draws its own trees (its own randomness, building trees or
    running whole cycles): its enumeration may grow with every node slot's children."""
    return not impl.follows_uniforms and (impl.builds_trees or impl.runs_cycles)


def _unseen_rounding(cert: Certificate) -> str:
    """A hint where a finding is as small as float32 rounding and the gate found only float64
    meeting the randomness: float32 that reaches it through NumPy or ``math`` is not seen."""
    if cert.precision.bits < 53 or cert.deviation is None or cert.deviation > TOLERANCE[24]:
        return ""
    if cert.tolerance_from.startswith("exact_tolerance"):
        return ""
    return (
        "; the gate found only float64 meeting the randomness, so this is a finding; only if your code "
        "reads float32 values into NumPy float64 arrays or math functions before they meet a random value "
        "(which the gate does not follow) is it float32 rounding, and exact_tolerance = 1e-6 says so "
        '(docs/gate.md, "The tolerance the gate finds")'
    )


def replay_exact(impl: Implementation, saved: dict) -> Certificate:
    """Re-certify the case of a saved exact-certification counterexample."""
    return certify_implementation(impl, saved["case"])
