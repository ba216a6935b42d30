"""The four verdicts on an engine's served tokens (docs/engines.md), each for one
``EngineCase`` and a driver (``rheo.integrations.engines``):

- ``exact``: every draw the engine makes while generating is enumerated
  (``rheo.checks.exact.tracer``); the law of its n tokens must equal the driver's
  ``reference_law`` (the engine without speculation) within float32 rounding
  (``EXACT_TOLERANCE``). Random replays with scrambled seeds confirm nothing escaped.
- ``statistical``: N seeded generations against the reference law, a chi-square test whose
  detectable total variation (power 0.99) is stated.
- ``greedy`` (T = 0): every generation equals the argmax sequence.
- ``differential``: every logits row the verifier consumed equals the row of a
  teacher-forced forward of the accepted prefix within ``ROW_TOLERANCE``; the first row that
  differs is named by request and position.
- ``logprobs``: every log-probability row the engine reports beside its tokens equals the
  same row without speculation (processed: the law sampled; raw: the target's log softmax).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from rheo.checks.exact.certificate import MAX_RUNS
from rheo.checks.exact.generation import generation_deviation
from rheo.checks.exact.tracer import RunCap, Unsupported, enumerate_runs, probe_runs
from rheo.checks.statistics.goodness_of_fit import gof
from rheo.integrations.engines.base import EngineCase, EngineRefused

EXACT_TOLERANCE = 1e-5  # float32 laws of cached and full forwards over a few tokens: measured up to 9.6e-7 apart
ROW_TOLERANCE = 1e-4  # float32 logits of a cached forward against a full one (measured: 2.4e-7 apart)
ALPHA = 1e-6  # the statistical test's level per case
PROBES = 3
RAISED = "raised"  # the first item of an enumerated outcome in which the engine raised


@dataclass
class Verdict:
    check: str  # "exact" | "statistical" | "greedy" | "differential"
    case: EngineCase
    verdict: str  # "lossless" | "not lossless" | "unsupported" | "crashed" | "not reproducible" | "reproducible"
    detail: str
    seconds: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.verdict in ("not lossless", "crashed", "not reproducible")

    def line(self) -> str:
        return f"{self.check} on {self.case.name}: {self.verdict}: {self.detail} ({self.seconds:.1f} s)"

    def to_json(self) -> dict:
        return {
            "check": self.check,
            "case": self.case.to_json(),
            "name": self.case.name,
            "verdict": self.verdict,
            "detail": self.detail,
            "seconds": round(self.seconds, 3),
            **self.data,
        }


def shown(prompt: tuple[int, ...]) -> str:
    """A prompt as a verdict names it: in full up to 8 tokens, else its start and length."""
    if len(prompt) <= 8:
        return str(list(prompt))
    return f"[{', '.join(map(str, prompt[:5]))}, ...] ({len(prompt)} tokens)"


def _refused(driver: Any, case: EngineCase, check: str) -> Verdict | None:
    """Why ``driver`` cannot run ``case``: a setting (``EngineCase.extra``) it does not honour
    (its ``extras``), or its own ``supports``; None when it can."""
    extras = tuple(getattr(driver, "extras", ()))
    unknown = [k for k, _ in case.extra if k not in extras]
    if unknown:
        why = f"extra {unknown[0]}: the {driver.name} driver honours {', '.join(extras) or 'no settings'}"
    else:
        why = driver.supports(case)
    return None if why is None else Verdict(check, case, "unsupported", why)


def _served(driver: Any, case: EngineCase, verdict: Verdict) -> Verdict:
    """The engine's own counters over the call (a driver's ``stats``: drafts verified and
    accepted, prefix-cache hits) added to ``verdict``; a lossless verdict on a case whose
    path the counters show was not taken (no draft verified; a prefix-cache case without a
    hit) becomes "unsupported": nothing about that path was judged."""
    stats = dict(getattr(driver, "stats", None) or {})
    if not stats:
        return verdict
    said = []
    if "draft_tokens" in stats:
        said.append(f"{stats['draft_tokens']} draft tokens verified, {stats.get('accepted_tokens', 0)} accepted")
    if case.setting("prefix_cache"):
        hits, queries = stats.get("prefix_cache_hits", 0), stats.get("prefix_cache_queries", 0)
        said.append(f"{hits} of {queries} prompt tokens from the prefix cache")
    verdict.data["engine_stats"] = stats
    verdict.detail += f"; {', '.join(said)}" if said else ""
    missed = []
    if stats.get("draft_tokens") == 0 and case.method != "plain":
        missed.append("no draft token was verified")
    if case.setting("prefix_cache") and not stats.get("prefix_cache_hits"):
        missed.append("no prompt token came from the prefix cache")
    if missed and verdict.verdict == "lossless":
        verdict.verdict = "unsupported"
        verdict.detail = f"{' and '.join(missed)}: the case's path was not exercised ({verdict.detail})"
    return verdict


def exact(driver: Any, case: EngineCase, max_runs: int = MAX_RUNS, seed: int = 0) -> Verdict:
    """The engine's exact law of its n tokens against the reference law."""
    t0 = time.perf_counter()
    refused = _refused(driver, case, "exact")
    if refused:
        return refused
    if not getattr(driver, "traceable", False):
        return Verdict("exact", case, "unsupported", f"{driver.name}'s draws cannot be followed here")
    roots = list(getattr(driver, "trace_roots", ()))
    law: dict[Any, float] = defaultdict(float)
    backend: dict[Any, float] = defaultdict(
        float
    )  # every uniform on its generator's grid (torch.rand: multiples of 2^-24)
    seen: dict[tuple, tuple] = {}
    runs = [0]

    def run() -> tuple:
        try:
            return driver.generate(case, [None])[0]
        except Exception as e:  # the engine raised on these draws: an outcome with its probability
            if type(e).__module__.startswith("rheo.checks"):
                raise  # the tracer's own (unsupported, cap)
            return (RAISED, f"{type(e).__name__}: {e}")

    try:
        ref = driver.reference_law(case)
        driver.generate(case, [seed])  # models built and caches warmed outside the enumeration
        for leaf in enumerate_runs(run, roots, max_runs, runs):
            law[leaf.result] += leaf.prob
            backend[leaf.result] += leaf.prob_backend
            seen[leaf.script] = leaf.result
        for script, out in probe_runs(run, roots, seed, PROBES):
            if seen.get(script) != out:
                raise Unsupported("a replay with random answers and scrambled seeds gave another output")
    except RunCap:
        return Verdict("exact", case, "unsupported", f"more than {max_runs} runs", time.perf_counter() - t0)
    except Unsupported as e:
        return Verdict("exact", case, "unsupported", str(e), time.perf_counter() - t0)
    except Exception as e:  # the engine crashed: a finding
        return Verdict("exact", case, "crashed", f"{type(e).__name__}: {e}", time.perf_counter() - t0)
    seconds = time.perf_counter() - t0
    raised = {out: p for out, p in law.items() if out and out[0] == RAISED}
    if raised:
        (message, prob), n = max(((out[1], p) for out, p in raised.items()), key=lambda x: x[1]), len(raised)
        total, on_grid = sum(raised.values()), sum(backend[out] for out in raised)
        detail = (
            f"generate raised with probability {total:.3g} ({on_grid:.3g} with the generator's own grid of "
            f"uniforms; {n} branch{'es' if n > 1 else ''} of the enumeration, the likeliest {prob:.3g}: {message}), "
            f"{runs[0]} runs"
        )
        if on_grid > 0:
            crash = {"runs": runs[0], "raised_probability": total, "raised_probability_on_grid": on_grid}
            return Verdict("exact", case, "crashed", detail, seconds, crash)
        law = {out: p for out, p in law.items() if out not in raised}  # unreachable on the grid
    dev, seq, got, want = generation_deviation(dict(law), ref)
    data: dict[str, Any] = {"runs": runs[0], "outputs": len(law), "deviation": dev, "tolerance": EXACT_TOLERANCE}
    if dev <= EXACT_TOLERANCE:
        detail = (
            f"largest deviation {dev:.2g} (tolerance {EXACT_TOLERANCE:g}, float32 rounding) on {len(ref)} sequences, "
            f"{runs[0]} runs"
        )
        return Verdict("exact", case, "lossless", detail, seconds, data)
    data |= {"sequence": list(seq), "engine": got, "reference": want}
    detail = (
        f"deviation {dev:.3g} at sequence {list(seq)} (engine {got:.6g}, without speculation {want:.6g}), "
        f"{runs[0]} runs"
    )
    return Verdict("exact", case, "not lossless", detail, seconds, data)


def statistical(driver: Any, case: EngineCase, n: int, seed: int = 0, alpha: float = ALPHA) -> Verdict:
    """``n`` generations seeded ``seed``, ``seed + 1``, ... against the reference law; with
    ``case.other_prompt`` the odd requests are another prompt's, sent in the same batch, and
    each prompt's outputs are judged against its own law (a row read from a neighbour
    shows)."""
    t0 = time.perf_counter()
    refused = _refused(driver, case, "statistical")
    if refused:
        return refused
    try:
        outs = driver.generate(case, list(range(seed, seed + n)))
    except EngineRefused as e:
        return Verdict("statistical", case, "unsupported", str(e), time.perf_counter() - t0)
    except Exception as e:
        return Verdict("statistical", case, "crashed", f"{type(e).__name__}: {e}", time.perf_counter() - t0)
    groups = [(case, outs[::2] if case.other_prompt else outs)]
    if case.other_prompt:
        groups.append((replace(case, prompt=case.other_prompt, other_prompt=None), outs[1::2]))
    results = [(c, gof(Counter(o), driver.reference_law(c), alpha)) for c, o in groups]
    seconds = time.perf_counter() - t0
    tvs = [r.detectable_tv for _, r in results]
    data = {
        "samples": n,
        "seed": seed,
        "chi2": [r.statistic for _, r in results],
        "p_value": [r.p_value for _, r in results],
        "detectable_tv": max(tvs),
        "generations_per_second": n / seconds if seconds > 0 else None,
    }
    words = "; ".join(
        f"prompt {shown(c.prompt)}: chi2 = {r.statistic:.1f} on {r.bins - 1} df, p = {r.p_value:.3g}, N = {r.n}"
        for c, r in results
    )
    for c, r in results:
        if r.impossible:
            outputs = [list(o) for o in r.impossible[:3]]
            detail = f"prompt {shown(c.prompt)}: outputs of probability 0 without speculation: {outputs} (N = {r.n})"
            return _served(driver, case, Verdict("statistical", case, "not lossless", detail, seconds, data))
    if any(r.reject for _, r in results):
        verdict = Verdict("statistical", case, "not lossless", f"{words}, seed {seed} (alpha {alpha:g})", seconds, data)
        return _served(driver, case, verdict)
    tv = "no TV bound: one outcome" if not all(np.isfinite(tvs)) else f"detects TV >= {max(tvs):.3f}"
    verdict = Verdict("statistical", case, "lossless", f"within {tv} ({words}, seed {seed})", seconds, data)
    return _served(driver, case, verdict)


def greedy(driver: Any, case: EngineCase, n: int = 10) -> Verdict:
    """At T = 0: ``n`` generations, each equal to its prompt's argmax sequence (with
    ``case.other_prompt``, the odd requests are the other prompt's, in the same batch)."""
    t0 = time.perf_counter()
    refused = _refused(driver, case, "greedy")
    if refused:
        return refused
    wants = [next(iter(driver.reference_law(case)))]
    if case.other_prompt:
        wants.append(next(iter(driver.reference_law(replace(case, prompt=case.other_prompt, other_prompt=None)))))
    try:
        outs = driver.generate(case, list(range(n)))
    except EngineRefused as e:
        return Verdict("greedy", case, "unsupported", str(e), time.perf_counter() - t0)
    except Exception as e:
        return Verdict("greedy", case, "crashed", f"{type(e).__name__}: {e}", time.perf_counter() - t0)
    want_of = [wants[i % len(wants)] for i in range(n)]
    wrong = [(i, o) for i, o in enumerate(outs) if o != want_of[i]]
    seconds = time.perf_counter() - t0
    if wrong:
        i, o = wrong[0]
        detail = f"request {i} served {list(o)}, without speculation {list(want_of[i])} ({len(wrong)} of {n} differ)"
        return _served(
            driver, case, Verdict("greedy", case, "not lossless", detail, seconds, {"requests": n, "request": i})
        )
    equal = " and ".join(str(list(w)) for w in wants)
    verdict = Verdict("greedy", case, "lossless", f"{n} of {n} generations equal {equal}", seconds, {"requests": n})
    return _served(driver, case, verdict)


def differential(driver: Any, case: EngineCase, requests: int = 10, tolerance: float | None = None) -> Verdict:
    """Every row the verifier consumed against a teacher-forced forward of its prefix, within
    ``tolerance`` (default: the driver's ``row_tolerance``, else ``ROW_TOLERANCE``)."""
    t0 = time.perf_counter()
    tolerance = float(tolerance if tolerance is not None else getattr(driver, "row_tolerance", ROW_TOLERANCE))
    refused = _refused(driver, case, "differential")
    if refused:
        return refused
    if not hasattr(driver, "verified_rows"):
        return Verdict("differential", case, "unsupported", f"{driver.name} does not show its logits")
    try:
        rows = driver.verified_rows(case, list(range(requests)))
    except Exception as e:
        return Verdict("differential", case, "crashed", f"{type(e).__name__}: {e}", time.perf_counter() - t0)
    worst, bad = 0.0, None
    for row in rows:
        if row.teacher is None:
            bad = bad or (row, float("inf"))
            continue
        diff = float(np.max(np.abs(np.asarray(row.engine) - np.asarray(row.teacher))))
        worst = max(worst, diff)
        if diff > tolerance and bad is None:
            bad = (row, diff)
    seconds = time.perf_counter() - t0
    data: dict[str, Any] = {
        "rows": len(rows),
        "requests": requests,
        "largest_difference": worst,
        "tolerance": tolerance,
    }
    if bad is not None:
        row, diff = bad
        position = len(row.prefix) - len(case.prompt)
        why = row.note or f"largest logit difference {diff:.3g} > {tolerance:g}"
        detail = (
            f"request {row.request}, the row for generated token {position} (after {list(row.prefix)}): {why}; "
            f"{len(rows)} rows compared"
        )
        data |= {"request": row.request, "position": position, "prefix": list(row.prefix)}
        return Verdict("differential", case, "not lossless", detail, seconds, data)
    detail = f"{len(rows)} rows of {requests} requests, largest logit difference {worst:.2g} (tolerance {tolerance:g})"
    return Verdict("differential", case, "lossless", detail, seconds, data)


def logprobs(driver: Any, case: EngineCase, requests: int = 10, tolerance: float | None = None) -> Verdict:
    """Every log-probability row the engine reports beside its tokens (the driver's
    ``reported``: per request, per kind, one row per generated token) against the same row
    without speculation (``reported_reference``: the law sampled, "processed", or the
    target's log softmax, "raw") within ``tolerance`` (default ``ROW_TOLERANCE``); -inf must
    meet -inf. The first row that differs is named by request, position and kind."""
    t0 = time.perf_counter()
    tolerance = float(tolerance if tolerance is not None else ROW_TOLERANCE)
    refused = _refused(driver, case, "logprobs")
    if refused:
        return refused
    if not hasattr(driver, "reported"):
        return Verdict("logprobs", case, "unsupported", f"{driver.name} reports no logprobs here")
    try:
        served = driver.reported(case, list(range(requests)))
    except Exception as e:
        return Verdict("logprobs", case, "crashed", f"{type(e).__name__}: {e}", time.perf_counter() - t0)
    worst, bad, count = 0.0, None, 0
    for r, (tokens, kinds) in enumerate(served):
        for kind, rows in kinds.items():
            if len(rows) != len(tokens):
                bad = bad or (r, kind, min(len(rows), len(tokens)), f"{len(rows)} rows for {len(tokens)} tokens")
                continue
            for i, row in enumerate(rows):
                want = driver.reported_reference(case, kind, tuple(tokens[:i]))
                got = np.asarray(row, dtype=np.float64)
                count += 1
                inf = np.isinf(want) | np.isinf(got)
                if np.any(inf & (got != want)):
                    j = int(np.flatnonzero(inf & (got != want))[0])
                    bad = bad or (r, kind, i, f"token {j}: reported {got[j]:.6g}, without speculation {want[j]:.6g}")
                    continue
                diff = float(np.max(np.abs(got[~inf] - want[~inf]))) if np.any(~inf) else 0.0
                worst = max(worst, diff)
                if diff > tolerance:
                    j = int(np.flatnonzero(~inf)[np.argmax(np.abs(got[~inf] - want[~inf]))])
                    bad = bad or (r, kind, i, f"token {j}: reported {got[j]:.6g}, without speculation {want[j]:.6g}")
    seconds = time.perf_counter() - t0
    data: dict[str, Any] = {"rows": count, "requests": requests, "largest_difference": worst, "tolerance": tolerance}
    if bad is not None:
        r, kind, i, why = bad
        detail = f"request {r}, the {kind} logprobs of generated token {i}: {why}; {count} rows compared"
        data |= {"request": r, "position": i, "kind": kind}
        return Verdict("logprobs", case, "not lossless", detail, seconds, data)
    kinds_seen = sorted({k for _, kinds in served for k in kinds})
    detail = (
        f"{count} rows ({', '.join(kinds_seen)}) of {requests} requests, largest difference {worst:.2g} "
        f"(tolerance {tolerance:g})"
    )
    return Verdict("logprobs", case, "lossless", detail, seconds, data)


def seeded(driver: Any, case: EngineCase, requests: int = 32) -> Verdict:
    """Requests with their own seeds (``SamplingParams(seed=...)``), sent twice in one
    batch each time: the same seed must give the same tokens, and nothing may raise."""
    t0 = time.perf_counter()
    refused = _refused(driver, case, "seeded")
    if refused:
        return refused
    seeds = list(range(requests))
    try:
        first = driver.generate(case, seeds, per_request_seeds=True)
        second = driver.generate(case, seeds, per_request_seeds=True)
    except EngineRefused as e:
        return Verdict("seeded", case, "unsupported", str(e), time.perf_counter() - t0)
    except Exception as e:
        detail = f"a seeded request raised {type(e).__name__}: {e}"
        return Verdict("seeded", case, "crashed", detail, time.perf_counter() - t0)
    differ = [i for i, (a, b) in enumerate(zip(first, second)) if a != b]
    seconds = time.perf_counter() - t0
    if differ:
        i = differ[0]
        detail = f"seed {seeds[i]} gave {list(first[i])}, then {list(second[i])} ({len(differ)} of {requests} differ)"
        return Verdict("seeded", case, "not reproducible", detail, seconds)
    return Verdict("seeded", case, "reproducible", f"{requests} seeded requests gave the same tokens twice", seconds)
