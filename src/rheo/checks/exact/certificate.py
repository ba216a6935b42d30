"""What exact certification of an implementation finds on one case (``Certificate``), and
the limits it works within (runs per part, probes, float tolerances).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rheo.checks.exact.precision import TOLERANCE, Precision

ESCAPES = (
    "os.urandom, secrets, random.SystemRandom, a generator of a library the check does not scan, or a C "
    "extension's own; the line cannot be named"
)


MAX_RUNS = 200_000  # executions of one part of the implementation per case
PROBES = 24  # random replays per part and case
__all__ = ["Certificate", "ESCAPES", "MAX_RUNS", "PROBES", "TOLERANCE", "CUT_WIDTH", "WITNESS_FORMAT"]
CUT_WIDTH = 2.0**-42  # bisection stops when a cut is known to this width
WITNESS_FORMAT = "rheo-witness/1"  # what a certificate's witness holds (rheo.checks.witness)


@dataclass
class Certificate:
    """What the exact check found on one case."""

    case: dict
    verdict: str  # "lossless" | "not lossless" | "unsupported" (not followed) | "crashed" | "skipped" (configuration)
    # | "outgrown" (past its budget or the run cap: skipped, named with its size) | "not reached" (not started)
    detail: str = ""
    deviation: float | None = None  # ideal law: every drawn uniform continuous
    backend_deviation: float | None = None  # every drawn uniform on its generator's grid (k / 2^24 for float32)
    sequence: list[int] = field(default_factory=list)
    continued: float | None = None
    target: float | None = None
    tolerance: float | None = None
    tolerance_from: str = ""  # the precision the tolerance follows and where it came from (or the override)
    precision: Precision = field(default_factory=Precision)  # the lowest precision that met a random value
    runs: int = 0
    trees: int = 0
    outputs: int = 0
    seconds: float = 0.0
    law: dict[tuple[int, ...], float] = field(default_factory=dict)
    draws: str = "symbolic"  # how the implementation's draws were followed: "symbolic" or "concrete" (a kernel, ...)
    witness: dict | None = None  # what the law was computed from (rheo.checks.witness replays it), when certified
    schedule_changed: bool = False  # "unsupported" because the draws changed with the values drawn
    tokens_per_cycle: float | None = None  # E|O| under the enumerated law: accepted drafts + the final token
    acceptance_rate: float | None = None  # E[accepted drafts] / depth
    reference_tokens_per_cycle: float | None = None  # the reference's E|O| on the same laws and configuration

    @property
    def name(self) -> str:
        return str(self.case.get("name", f"V={self.case['vocab_size']} {self.case['policy']} K={self.case['K']}"))

    @property
    def rounding(self) -> str:
        """The words ", up to float32 rounding" where the verdict is lossless only at a lower precision's
        tolerance (its deviation above float64's); "" otherwise."""
        if self.verdict != "lossless" or self.deviation is None or self.deviation <= TOLERANCE[53]:
            return ""
        if self.tolerance_from.startswith("exact_tolerance") or self.precision.bits >= 53:
            return ", within exact_tolerance"
        return f", up to {self.precision.name} rounding"

    def summary(self) -> str:
        if self.verdict in ("lossless", "not lossless"):
            return (
                f"{self.name}: {self.verdict} (exact): deviation {self.deviation:.3g}{self.rounding} "
                f"(tolerance {self.tolerance:g}, {self.tolerance_from}; "
                f"{self.backend_deviation:.3g} with the generators' grids), "
                f"{self.runs} runs, {self.trees} trees, {self.seconds:.2f} s"
                + (", concrete draws" if self.draws == "concrete" else "")
                + (f"; {self.acceptance()}" if self.tokens_per_cycle is not None else "")
            )
        return f"{self.name}: {self.verdict}: {self.detail}"

    def acceptance(self) -> str:
        """ "2.31 tokens per cycle, acceptance rate 0.66 (the reference: 2.40)"."""
        if self.tokens_per_cycle is None:
            return ""
        out = f"{self.tokens_per_cycle:.3g} tokens per cycle"
        if self.acceptance_rate is not None:
            out += f", acceptance rate {self.acceptance_rate:.3g}"
        if self.reference_tokens_per_cycle is not None:
            out += f" (the reference: {self.reference_tokens_per_cycle:.3g})"
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "case_name": self.name,
            "verdict": self.verdict,
            "detail": self.detail,
            "max_abs_deviation": self.deviation,
            "backend_max_abs_deviation": self.backend_deviation,
            "worst_sequence": self.sequence,
            "worst_continued": self.continued,
            "worst_target": self.target,
            "tolerance": self.tolerance,
            "tolerance_from": self.tolerance_from,
            "precision": self.precision.name,
            "runs": self.runs,
            "trees": self.trees,
            "outputs": self.outputs,
            "seconds": round(self.seconds, 3),
            "draws": self.draws,
            "tokens_per_cycle": self.tokens_per_cycle,
            "acceptance_rate": self.acceptance_rate,
            "reference_tokens_per_cycle": self.reference_tokens_per_cycle,
        }

    def with_witness(self) -> dict[str, Any]:
        """``to_json`` with the case, the law and the witness: what ``rheo.checks.witness.replay``
        recomputes the law and the verdict from."""
        return {
            **self.to_json(),
            "case": self.case,
            "output_law": [[list(o), p] for o, p in sorted(self.law.items())],
            "witness": self.witness,
        }
