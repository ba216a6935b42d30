"""Exact certification of a mixed batch (docs/adapters.md, "Mixed batches"): one
``cycle_batch`` call whose rows are different requests, every draw of it enumerated
(``rheo.checks.exact.tracer``, or concrete draws for code the tracer cannot follow), giving
the *joint* law of the rows' outputs. Two things are shown from it, both exactly:

- each row's marginal law, continued to D+1 tokens, is its own target's (``max_deviation``
  against the row's judged instance: p_T, or the implementation's ``sampler_law``);
- the rows are independent: the joint law equals the product of the marginals, at every
  combination of outputs (a row that reads a neighbour's draw or table shows here even when
  its marginal happens to be right).

Together they say the joint law is the product of the rows' target laws. The tolerance is
the one exact certification finds (1e-9 where float64 met every random value, 1e-6 for
float32) or the implementation's ``exact_tolerance``.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from rheo.checks.exact.certificate import MAX_RUNS
from rheo.checks.exact.certify import _cycle_law, _roots
from rheo.checks.exact.handed import CallCounter
from rheo.checks.exact.precision import Precision
from rheo.checks.exact.tracer import RunCap, Unsupported
from rheo.checks.protocol.calls import call_cycle_mixed
from rheo.checks.protocol.inputs import law_instance
from rheo.checks.protocol.judged import judged_instance
from rheo.checks.protocol.load import Implementation
from rheo.checks.protocol.outputs import BadOutput
from rheo.reference.certify import max_deviation

MAX_JOINT = 200_000  # combinations of row outputs compared for independence before the check refuses


@dataclass
class MixedCertificate:
    """What exact certification found on one mixed batch."""

    cases: list[dict]
    verdict: str  # "lossless" | "not lossless" | "unsupported" | "crashed" | "outgrown"
    detail: str = ""
    deviations: list[float] = field(default_factory=list)  # per row: its marginal's, continued to D+1
    sequences: list[list[int]] = field(default_factory=list)  # per row: where its deviation is largest
    dependence: float | None = None  # max |joint - product of marginals|
    dependent_outputs: list[list[int]] | None = None  # where that is largest: one output per row
    tolerance: float | None = None
    draws: str = "symbolic"
    runs: int = 0
    outputs: int = 0
    seconds: float = 0.0

    @property
    def name(self) -> str:
        return " | ".join(str(c.get("name", "?")) for c in self.cases)

    def to_json(self) -> dict:
        return {
            "rows": [c.get("name") for c in self.cases],
            "verdict": self.verdict,
            "detail": self.detail,
            "deviations": self.deviations,
            "sequences": self.sequences,
            "dependence": self.dependence,
            "dependent_outputs": self.dependent_outputs,
            "tolerance": self.tolerance,
            "draws": self.draws,
            "runs": self.runs,
            "joint_outputs": self.outputs,
            "seconds": round(self.seconds, 3),
        }


def joint_law(
    impl: Implementation, cases: list[dict], seeds: list[int] | None, max_runs: int = MAX_RUNS, seed: int = 0
) -> tuple[dict[tuple, float], Precision, str, int]:
    """{(row 0's output, row 1's, ...): probability} of one ``cycle_batch`` call on
    ``cases`` (seeds: each row's ``config["seed"]``, or None), the lowest precision that met
    a random value, how the draws were followed and the runs it took: the enumeration of
    whole cycles (``certify._cycle_law``) on this call."""
    insts = [law_instance(c) for c in cases]
    counter = CallCounter(max_runs)

    def call() -> tuple:
        return tuple(call_cycle_mixed(impl, insts, seeds))

    law, _, bits, how, _ = _cycle_law(
        impl, insts[0], _roots(impl), counter, np.random.default_rng(seed), "fast", call, "cycle_batch"
    )
    return dict(law), bits, how, counter.runs


def certify_mixed(
    impl: Implementation,
    cases: list[dict],
    seeds: list[int] | None = None,
    max_runs: int = MAX_RUNS,
    seed: int = 0,
) -> MixedCertificate:
    """Each row's law against its own target and the rows' independence, exactly, on one
    mixed batch of ``cases`` (module docstring)."""
    t0 = time.perf_counter()
    cert = MixedCertificate(cases, "unsupported")
    try:
        law, bits, how, runs = joint_law(impl, cases, seeds, max_runs, seed)
    except NotImplementedError as e:
        cert.detail = f"the implementation raised NotImplementedError ({e})"
        return _done(cert, t0)
    except RunCap as e:
        cert.verdict, cert.detail = "outgrown", f"past the run cap ({e.args[0]}): the batch's draws are too many"
        return _done(cert, t0)
    except Unsupported as e:
        cert.detail = str(e)
        return _done(cert, t0)
    except BadOutput as e:
        cert.verdict, cert.detail = "crashed", f"malformed output: {e}"
        return _done(cert, t0)
    except Exception as e:  # the implementation crashed: a finding, with its message
        cert.verdict, cert.detail = "crashed", f"{type(e).__name__}: {e}"
        return _done(cert, t0)
    cert.draws, cert.runs, cert.outputs = how, runs, len(law)
    declared = getattr(impl.obj, "exact_tolerance", None)
    tol = float(declared) if declared is not None else bits.tolerance
    cert.tolerance = tol
    total = sum(law.values())
    if abs(total - 1) > tol:
        cert.detail = f"the enumerated joint law sums to {total:.12g}, not 1: some randomness was not followed"
        return _done(cert, t0)
    rows = len(cases)
    marginals: list[dict[tuple, float]] = [defaultdict(float) for _ in range(rows)]
    for outs, p in law.items():
        for r, o in enumerate(outs):
            marginals[r][o] += p
    for r, case in enumerate(cases):
        dev = max_deviation(judged_instance(impl, law_instance(case)), dict(marginals[r]))
        cert.deviations.append(float(dev.value))
        cert.sequences.append(list(dev.sequence))
    combos = int(np.prod([len(m) for m in marginals]))
    if combos > MAX_JOINT:
        cert.verdict = "outgrown"
        cert.detail = f"{combos:,} combinations of row outputs (more than {MAX_JOINT:,}): independence not compared"
        return _done(cert, t0)
    worst, where = 0.0, None
    for outs in itertools.product(*[sorted(m) for m in marginals]):
        gap = abs(law.get(outs, 0.0) - float(np.prod([marginals[r][o] for r, o in enumerate(outs)])))
        if gap > worst:
            worst, where = gap, [list(o) for o in outs]
    cert.dependence, cert.dependent_outputs = worst, where
    bad = [r for r, d in enumerate(cert.deviations) if d > tol]
    if bad:
        r = bad[0]
        cert.verdict = "not lossless"
        cert.detail = (
            f"row {r} ({cases[r].get('name')}) deviates from its own law by {cert.deviations[r]:.3g} at sequence "
            f"{cert.sequences[r]} (tolerance {tol:g})"
        )
    elif worst > tol:
        cert.verdict = "not lossless"
        cert.detail = (
            f"the rows are not independent: P(outputs {where}) differs from the product of the rows' laws by "
            f"{worst:.3g} (tolerance {tol:g})"
        )
    else:
        cert.verdict = "lossless"
        cert.detail = (
            f"every row's law is its own (largest deviation {max(cert.deviations):.2g}) and the rows are "
            f"independent (largest gap {worst:.2g}), tolerance {tol:g}"
        )
    return _done(cert, t0)


def _done(cert: MixedCertificate, t0: float) -> MixedCertificate:
    cert.seconds = time.perf_counter() - t0
    return cert
