"""What exact certification of an implementation finds on one case (``Certificate``), and
the limits it works within (runs per part, probes, float tolerances).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ESCAPES = (
    "os.urandom, secrets, random.SystemRandom, a generator of a library the check does not scan, or a C "
    "extension's own; the line cannot be named"
)


MAX_RUNS = 200_000  # executions of one part of the implementation per case
PROBES = 24  # random replays per part and case
TOLERANCE = {53: 1e-9, 24: 1e-6}
CUT_WIDTH = 2.0**-42  # bisection stops when a cut is known to this width
WITNESS_FORMAT = "rheo-witness/1"  # what a certificate's witness holds (rheo.checks.witness)


@dataclass
class Certificate:
    """What the exact check found on one case."""

    case: dict
    verdict: str  # "lossless" | "not lossless" | "unsupported" (not followed) | "crashed" | "skipped" (configuration)
    detail: str = ""
    deviation: float | None = None  # ideal law: every drawn uniform continuous
    backend_deviation: float | None = None  # every drawn uniform on its generator's grid (k / 2^24 for float32)
    sequence: list[int] = field(default_factory=list)
    continued: float | None = None
    target: float | None = None
    tolerance: float | None = None
    runs: int = 0
    trees: int = 0
    outputs: int = 0
    seconds: float = 0.0
    law: dict[tuple[int, ...], float] = field(default_factory=dict)
    draws: str = "symbolic"  # how the implementation's draws were followed: "symbolic" or "concrete" (a kernel, ...)
    witness: dict | None = None  # what the law was computed from (rheo.checks.witness replays it), when certified
    schedule_changed: bool = False  # "unsupported" because the draws changed with the values drawn

    @property
    def name(self) -> str:
        return str(self.case.get("name", f"V={self.case['vocab_size']} {self.case['policy']} K={self.case['K']}"))

    def summary(self) -> str:
        if self.verdict in ("lossless", "not lossless"):
            return (
                f"{self.name}: {self.verdict} (exact): deviation {self.deviation:.3g} (tolerance {self.tolerance:g}; "
                f"{self.backend_deviation:.3g} with the generators' grids), "
                f"{self.runs} runs, {self.trees} trees, {self.seconds:.2f} s"
                + (", concrete draws" if self.draws == "concrete" else "")
            )
        return f"{self.name}: {self.verdict}: {self.detail}"

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
            "runs": self.runs,
            "trees": self.trees,
            "outputs": self.outputs,
            "seconds": round(self.seconds, 3),
            "draws": self.draws,
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
