"""A statistical pass that detects only large departures says so (issue 36 item 7): in its
headline, in its data (``thin_evidence``), in the gate's summary line and in the JSON summary.
The budgets that size the cycles are bounds: tests/test_prefix_law.py (the pilot)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rheo.checks.gate.report import render
from rheo.checks.gate.run import summary
from rheo.checks.outcome import CheckResult
from rheo.checks.statistics.output_law import THIN_TV, law_head, thin_data

ROOT = Path(__file__).resolve().parent.parent


def _cases(*tvs: float) -> dict:
    return {f"case {i}": {"detectable_tv": tv} for i, tv in enumerate(tvs)}


def test_the_headline_says_thin_only_above_the_threshold():
    thin = law_head(_cases(0.05, 0.32), None, 300)
    assert "within detectable TV 0.0500 to 0.3200 (thin evidence: a law up to TV 0.32" in thin, thin
    assert thin_data(_cases(0.05, 0.32)) == {"detectable_tv": 0.32, "threshold": THIN_TV}
    strong = law_head(_cases(0.03, THIN_TV), None, 20_000)
    assert "thin evidence" not in strong and thin_data(_cases(0.03, THIN_TV)) is None
    assert "thin evidence" not in law_head(_cases(0.5), {"case_name": "case 0"}, 300)  # a failure is no pass


def test_the_summary_line_names_the_thin_checks():
    results = [
        CheckResult(
            "impl: output law", "implementation", "pass", 1.0, "...", data={"thin_evidence": thin_data(_cases(0.2))}
        ),
        CheckResult("impl: exact certification", "implementation", "pass", 1.0, "..."),
    ]
    assert summary(results)["thin_evidence"] == {"impl: output law": 0.2}
    last = render(results, "quick").splitlines()[-1]
    assert (
        last.startswith("gate PASSED (quick)")
        and "thin evidence in 1 (detectable TV up to 0.20): impl: output law" in last
    )
    assert "thin evidence" not in render(results[1:], "quick").splitlines()[-1]


def test_a_gate_at_few_cycles_reports_thin_evidence(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "rheo.cli", "gate", "--impl", "examples.loop_impl:LoopImplementation", "--profile",
         "smoke", "--only", "output law (", "--cycles", "300", "--json", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    [check] = out["checks"]
    tv = check["data"]["thin_evidence"]["detectable_tv"]
    assert tv > THIN_TV and "thin evidence" in check["detail"]
    assert out["summary"]["thin_evidence"] == {check["name"]: tv}
