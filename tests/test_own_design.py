"""Issue 36 item 8: a design with its own tree rules declares the settings it does not take
(``own_design``), and coverage reports them as not applying, never as a limit; a Top-K design
that expands every child a layer keeps (beam = K) has large cases beyond exact reach."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rheo.checks.cases.large import select_large
from rheo.checks.cases.space import select
from rheo.checks.gate.report import coverage_lines
from rheo.checks.protocol.load import Implementation

ROOT = Path(__file__).resolve().parent.parent


def _topk_full(c: dict) -> bool:
    """Top-K trees that expand every child (beam = K), K = 2, T > 0, no filters."""
    return c["policy"] == "topk" and c["K"] == 2 and c["beam"] == 2 and c.get("target_top_k") is None


class OwnTree:
    own_design = ("policy", "m", "beam", "budget")

    def supports(self, config):
        return _topk_full(config)

    def cycle(self, draft_logits, target_logits, config, temperature):  # never run here
        raise NotImplementedError


def test_coverage_says_own_design_and_no_limit():
    impl = Implementation(OwnTree(), "own")
    sel = select(impl.supports, "exact", "smoke", own_design=impl.own_design)
    cov = sel.coverage()
    assert cov["policy"]["not_applicable"] == ["own design"] and cov["policy"]["refused"] == []
    assert "policy" not in sel.limited_by and "beam" not in sel.limited_by
    lines = "\n".join(coverage_lines(cov))
    assert "does not apply (own design)" in lines
    plain = select(impl.supports, "exact", "smoke")  # undeclared: the same cases, policy a limit
    assert "policy" in plain.limited_by and "not_applicable" not in plain.coverage()["policy"]
    assert [c["name"] for c in plain.cases] == [c["name"] for c in sel.cases]


def test_a_top_k_design_with_beam_k_has_large_cases():
    sel = select_large(lambda c: c["policy"] == "topk" and c["beam"] == c["K"] and c["K"] > 1, "quick")
    assert sel.cases and all(c["beam"] == c["K"] for c in sel.cases)


def test_own_design_names_are_checked_at_load(tmp_path):
    f = tmp_path / "adapter.py"
    f.write_text(
        "class A:\n    own_design = ('policy', 'tree_shape')\n    def cycle(self, d, t, c, T):\n        return [0]\n",
        encoding="utf-8",
    )
    r = subprocess.run(
        [sys.executable, "-m", "rheo.cli", "gate", "--impl", f"{f}:A", "--profile", "smoke"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert r.returncode == 2 and "own_design names 'tree_shape'" in r.stderr, r.stderr
