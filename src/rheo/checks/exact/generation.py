"""Exact certification of whole generations (the protocol's ``generate``): every run of the
implementation's intercepted draws over a whole generation of n_tokens tokens, enumerated by
``rheo.checks.exact.tracer`` as for a single ``cycle`` (``rheo.checks.exact.certify``),
gives the law of the n tokens; it is compared with the target's n-token law p_T (the
product of the judged target law at each prefix, docs/spec.md §5) on V^n_tokens. Runs
multiply with the cycles, so the cases are small (``rheo.checks.cases.generations``:
n_tokens 3 to 5, V 2 to 3). Random replays with scrambled seeds confirm that nothing
escaped; anything the tracer cannot follow makes the certificate "unsupported" and the
statistical check (``rheo.checks.statistics.generation_law``) decides.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from rheo.checks import parallel
from rheo.checks.cases.generations import generation_cases
from rheo.checks.exact.certificate import ESCAPES, MAX_RUNS, PROBES, WITNESS_FORMAT, Certificate
from rheo.checks.exact.certify import _choices, _roots, whole_law_tolerance
from rheo.checks.exact.precision import Precision
from rheo.checks.exact.tracer import RunCap, Unsupported, enumerate_runs, probe_runs
from rheo.checks.outcome import Outcome
from rheo.checks.protocol.generation import call_generate, generation_config, generation_sequence_law, n_tokens_of
from rheo.checks.protocol.inputs import law_instance
from rheo.checks.protocol.judged import judged_instance
from rheo.checks.protocol.load import Implementation, implementation_of, message_of, shipped
from rheo.checks.protocol.outputs import BadOutput
from rheo.progress import Meter

GENERATION_CHECK = "exact certification, whole generations"  # the "check" of its counterexample files


def generation_deviation(law: dict, target: dict) -> tuple[float, tuple, float, float]:
    """(max |law - target| over V^n, the first sequence attaining it, its law, its target)."""
    best: tuple[float, tuple, float, float] = (-1.0, (), 0.0, 0.0)
    for seq in sorted(set(law) | set(target)):
        got, want = law.get(seq, 0.0), target.get(seq, 0.0)
        if abs(got - want) > best[0]:
            best = (abs(got - want), seq, got, want)
    return best


def certify_generation(impl: Implementation, case: dict, max_runs: int = MAX_RUNS, seed: int = 0) -> Certificate:
    """The implementation's exact law of n_tokens-token generations on ``case`` and its
    deviation from p_T on V^n_tokens. ``Certificate.outputs`` counts the sequences."""
    t0 = time.perf_counter()
    inst = law_instance(case)
    n = n_tokens_of(case)
    cert = Certificate(case, "skipped")
    if not impl.supports(generation_config(inst, n)):
        cert.detail = "the implementation does not support this configuration"
        return cert
    roots = _roots(impl)
    rng = np.random.default_rng(seed)
    law: dict[tuple, float] = defaultdict(float)
    backend: dict[tuple, float] = defaultdict(float)
    seen: dict[tuple, tuple] = {}
    runs = [0]
    bits = Precision()
    shown: list[dict] = []

    def run() -> tuple:
        return call_generate(impl, inst, n)

    try:
        for leaf in enumerate_runs(run, roots, max_runs, runs, (impl.obj,)):
            shown.append({"steps": _choices(leaf), "output": list(leaf.result)})
            law[leaf.result] += leaf.prob
            backend[leaf.result] += leaf.prob_backend
            seen[leaf.script] = leaf.result
            bits = bits.lower(leaf.precision)
        for script, out in probe_runs(run, roots, int(rng.integers(2**31)), PROBES, (impl.obj,)):
            if seen.get(script) != out:
                raise Unsupported(
                    "generate: a replay with random answers and scrambled seeds gave another output: it uses "
                    f"randomness this check does not intercept ({ESCAPES})"
                )
    except NotImplementedError as e:
        cert.detail = f"the implementation raised NotImplementedError ({e})"
        return cert
    except RunCap as e:
        cert.verdict, cert.detail = "unsupported", f"more than {e.args[0]} runs were needed (the cap): not finished"
        cert.runs, cert.seconds = runs[0], time.perf_counter() - t0
        return cert
    except Unsupported as e:
        cert.verdict, cert.detail = "unsupported", str(e)
        cert.runs, cert.seconds = runs[0], time.perf_counter() - t0
        return cert
    except BadOutput as e:
        cert.verdict, cert.detail = "crashed", f"malformed output: {e}"
        cert.runs, cert.seconds = runs[0], time.perf_counter() - t0
        return cert
    except Exception as e:  # the implementation crashed: a finding, with its message
        cert.verdict, cert.detail = "crashed", f"generate raised {type(e).__name__}: {message_of(e)}"
        cert.runs, cert.seconds = runs[0], time.perf_counter() - t0
        return cert
    cert.runs, cert.outputs = runs[0], len(law)
    tol = whole_law_tolerance(cert, impl, law, bits, t0)
    if tol is None:
        return cert
    try:
        target = generation_sequence_law(judged_instance(impl, inst), n, getattr(inst, "stops", None))
    except BadOutput as e:
        cert.verdict, cert.detail = "crashed", f"malformed output: {e}"
        return cert
    dev, seq, got, want = generation_deviation(dict(law), target)
    cert.deviation, cert.sequence, cert.continued, cert.target = dev, list(seq), got, want
    cert.backend_deviation = generation_deviation(dict(backend), target)[0]
    cert.law = dict(law)
    judged = "sampler_law" if impl.has_sampler_law else "p_T"
    cert.witness = {"format": WITNESS_FORMAT, "judged": judged, "generation": shown, "n_tokens": n}
    cert.verdict = "lossless" if dev <= tol else "not lossless"
    cert.seconds = time.perf_counter() - t0
    return cert


def generation_exact_case(ref: Implementation | str, case: dict, max_runs: int) -> Certificate:
    """One case of the check (a piece of work: rheo.checks.parallel)."""
    return certify_generation(implementation_of(ref), case, max_runs)


def check_generation_exact(
    impl: Implementation,
    level: str = "quick",
    extra_cases: list[dict] | tuple = (),
    max_runs: int = MAX_RUNS,
    progress: Callable[[str], None] | None = None,
) -> Outcome:
    """Certify the implementation's whole generations exactly on ``generation_cases(level)``
    and the user's ``extra_cases`` (each with its n_tokens, default depth + 1)."""
    cases = generation_cases(level) + list(extra_cases)
    meter = Meter(f"exact certification of generations ({parallel.current().description})", len(cases), progress)
    calls = [(shipped(impl), case, max_runs) for case in cases]
    certs: list[Certificate] = parallel.current().map(generation_exact_case, calls, lambda i: meter.advance())
    meter.close()
    done = [c for c in certs if c.verdict in ("lossless", "not lossless")]
    data: dict[str, Any] = {
        "cases": [{**c.to_json(), "n_tokens": n_tokens_of(c.case)} for c in certs if c.verdict != "skipped"],
        "certified": len(done),
        "unsupported_configurations": sum(c.verdict == "skipped" for c in certs),
        "runs": sum(c.runs for c in certs),
    }
    head = {"check": GENERATION_CHECK, "implementation": impl.name}
    crashed = [c for c in certs if c.verdict == "crashed"]
    if crashed:
        first = crashed[0]
        detail = f"the implementation failed on {first.name}: {first.detail}"
        return Outcome("fail", detail, {**head, **first.to_json(), "case": first.case}, data)
    bad = [c for c in certs if c.verdict == "not lossless"]
    if bad:
        cert = bad[0]
        line = (
            f"not lossless (exact) on {cert.name}: deviation {cert.deviation:.3g} > tolerance {cert.tolerance:g} "
            f"at the {n_tokens_of(cert.case)}-token sequence {cert.sequence} (its law {cert.continued:.6g}, "
            f"target {cert.target:.6g}); {cert.runs} runs, {cert.seconds:.2f} s"
        )
        payload = {
            **head,
            "verdict": "not lossless (exact)",
            **cert.to_json(),
            "case": cert.case,
            "output_law": {" ".join(map(str, o)): p for o, p in sorted(cert.law.items())},
            "replay": f"rheo gate --impl {impl.name} --replay FILE",
            "witness": cert.witness,
        }
        return Outcome("fail", line, payload, data)
    refused = [c for c in certs if c.verdict == "unsupported"]
    if refused:
        return Outcome(
            "skip",
            f"could not be followed exactly on {refused[0].name}: {refused[0].detail}; the statistical check decides",
            data=data,
        )
    if not done:
        return Outcome("fail", f"no case of the {len(cases)} was supported: nothing is proven", data=data)
    worst = max(done, key=lambda c: c.deviation or 0.0)
    names = ", ".join(c.name for c in done[:6]) + (", ..." if len(done) > 6 else "")
    return Outcome(
        "pass",
        f"lossless (exact) on {len(done)} cases ({names}): largest deviation {worst.deviation:.2g} "
        f"(tolerance {worst.tolerance:g}) on V^n_tokens, {data['runs']} runs, {sum(c.seconds for c in done):.1f} s",
        data=data,
    )
