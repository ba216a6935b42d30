"""The gate's check of an implementation at real vocabulary sizes, exactly (docs/gate.md,
"Real vocabulary sizes"): exact certification on sparse cases at V = 8,193 to 256,000
(``rheo.checks.cases.vocab``); and "impl: rows without a law", two probes of what the
implementation does with a target row of NaN, or of -inf everywhere: it must raise.

Catches: index arithmetic that only large vocabularies reach (a partial last tile dropped, a
16-bit or off-by-one tile offset, ids past V - 1: the planted bugs of
``examples/tiled_kernel.py``), exactly, with the sequence that shows it. And an
implementation that emits tokens from a target row of NaN or of -inf everywhere (a row that
has no law: it must raise). Why not easier: the exact matrix stops near V = 8 and the V =
32,000 check of the batched protocol is dense, unfiltered and statistical; a kernel's tile
boundaries sit at multiples of its block size, which small vocabularies never cross.
"""

from __future__ import annotations

import math
import time

import numpy as np

from rheo.checks.cases.vocab import vocab_cases
from rheo.checks.exact.budget import case_clock
from rheo.checks.exact.certify import certify_implementation
from rheo.checks.gate.coverage import supported_cases
from rheo.checks.outcome import Check, Outcome, Profile
from rheo.checks.protocol.calls import impl_cycle
from rheo.checks.protocol.inputs import case_config, law_instance
from rheo.checks.protocol.load import Implementation
from rheo.reference import Table, Uniforms
from rheo.reference.instance import Instance

NAME = "impl: real vocabulary sizes, exactly"
ROWS = "impl: rows without a law"
BUDGET = 120.0  # seconds after which no further case is started (the cases not reached are named)
CASE_SECONDS = 45.0  # one case's certification past this is outgrown: a draw whose cost follows V, not its support


def broken_rows(impl: Implementation, inst: Instance) -> list[str]:
    """What the implementation did with target rows that have no law (every entry NaN; every
    entry -inf): each one it answered with tokens instead of raising, in a line."""
    found = []
    for what, value in (("NaN", math.nan), ("-inf", 0.0)):  # -inf logits: a law of zeros
        bad = Instance(inst.n, Table("target", {}, default=(value,) * inst.n), inst.draft, inst.config)
        c = inst.config
        try:
            tokens = impl_cycle(impl, bad, Uniforms.random(np.random.default_rng(0), c.K, c.B, c.depth))
        except Exception:  # raised (BadOutput names the entry point): nothing emitted
            continue
        found.append(f"target rows of {what} everywhere: it emitted {list(tokens)} instead of raising")
    return found


def vocab_checks(impl: Implementation, stem: str, owner: str | None) -> list[Check]:
    """The check, for an implementation that verifies (``cycle`` or ``verify``; none otherwise)."""
    if not (impl.runs_cycles or impl.verifies):
        return []

    def run(profile: Profile, progress) -> Outcome:
        cases = [c for c in vocab_cases(profile.matrix) if impl.supports(case_config(c))]
        if not cases:
            why = "it supports none of the sparse chains at V = 8,193 to 256,000 (K = 1, depth 1, T = 1, no filters)"
            return Outcome("skip", f"not applicable: {why}", data={"applicable": False})
        certs, bad, lines, late = [], [], [], []
        t0 = time.perf_counter()
        for case in cases:
            if time.perf_counter() - t0 > BUDGET:
                late.append(case["name"])
                continue
            reason = f"outgrew the {CASE_SECONDS:g} s a vocabulary case may take"
            with case_clock(case["name"], time.time() + CASE_SECONDS, None, reason):
                cert = certify_implementation(impl, case)
            certs.append(cert)
            line = f"{case['name']}: {cert.verdict}"
            if cert.deviation is not None:
                line += f", deviation {cert.deviation:.3g} at sequence {cert.sequence}"
            if cert.detail:
                line += f" ({cert.detail})"
            line += f", {cert.runs} runs, {cert.seconds:.1f} s"
            lines.append(line)
            if progress:
                progress(f"        {line}")
            if cert.verdict in ("not lossless", "crashed"):
                bad.append(line)
        data = {
            "cases": [
                {
                    "case": c.name,
                    "vocab_size": c.case["vocab_size"],
                    "verdict": c.verdict,
                    "deviation": c.deviation,
                    "sequence": c.sequence,
                    "runs": c.runs,
                    "seconds": round(c.seconds, 3),
                    "detail": c.detail,
                }
                for c in certs
            ],
        }
        if bad:
            worst = next((c for c in certs if c.verdict == "not lossless"), None)
            payload = {"findings": bad, **({"case": worst.case["name"]} if worst else {})}
            return Outcome("fail", f"{len(bad)} finding(s); first: {bad[0]}", payload, data)
        done = [c for c in certs if c.verdict == "lossless"]
        if not done:
            return Outcome("skip", f"no case certified: {lines[0]}", data=data)
        sizes = sorted({c.case["vocab_size"] for c in done})
        slowest = max(done, key=lambda c: c.seconds)
        late_words = f"; {len(late)} not reached within {BUDGET:g} s: {', '.join(late)}" if late else ""
        data["not_reached"] = late
        detail = (
            f"lossless (exact) on {len(done)} of {len(cases)} sparse cases at V = "
            f"{', '.join(f'{v:,}' for v in sizes)}, largest deviation {max(c.deviation or 0 for c in done):.2g}; "
            f"slowest {slowest.name} {slowest.seconds:.1f} s{late_words}"
        )
        return Outcome("pass", detail, None, data)

    def rows(profile: Profile, progress) -> Outcome:
        cases = supported_cases(impl, "exact", "smoke").cases
        if not cases:
            return Outcome(
                "skip", "not applicable: it supports none of the small exact cases", data={"applicable": False}
            )
        found = broken_rows(impl, law_instance(cases[0]))
        data = {"case": cases[0].get("name"), "findings": found}
        if found:
            return Outcome("fail", f"it emits tokens from a row that has no law: {found[0]}", {"findings": found}, data)
        return Outcome("pass", f"target rows of NaN and of -inf everywhere raise ({cases[0].get('name')})", None, data)

    what = impl.provides()
    return [
        Check(f"{NAME} ({what})", "implementation", run, file_stem=f"{stem}-vocab", owner=owner),
        Check(f"{ROWS} ({what})", "implementation", rows, file_stem=f"{stem}-rows", owner=owner),
    ]
