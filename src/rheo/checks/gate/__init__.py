"""The gate room: ``rheo gate`` itself. Its check lists (``checklist``: the reference's
exact matrix, negative controls and paper example in ``reference_checks``, the fastpath's
in ``fastpath_checks``, and ``impl_checks`` for ``--impl``), running them and the verdict
(``run``), the text table and JUnit XML (``report``), the implementation checks in a
supervised worker (``supervised``) and the ``rheo_checker`` pytest fixture
(``pytest_plugin``). It sits at the top of ``rheo.checks``: it may import every other room
of it, ``rheo.casefile``, ``rheo.reference``, ``rheo.fastpath`` (lazily: torch is
optional), ``rheo.testing`` and ``rheo.integrations``; nothing in ``rheo.checks`` imports
it, except through the worker's runner name.

The names below are re-exported, so ``rheo.checks.gate.gate_checks`` and the other names
importable before the room was split keep working.
"""

from __future__ import annotations

from rheo.checks.gate.checklist import gate_checks, impl_checks
from rheo.checks.gate.fastpath_checks import (
    REAL_POLICIES,
    REAL_PROMPT,
    REAL_SECOND,
    REAL_TESTS_PER_POLICY,
    REAL_TREE,
    fast_calibration_check,
    fast_cycle_law_check,
    fast_decisions_check,
    fast_ties_check,
    real_model_check,
)
from rheo.checks.gate.reference_checks import (
    MATRIX_FAMILIES,
    control_check,
    corpus_dir,
    exact_matrix_check,
    matrix_cases,
    matrix_instance,
    paper_example_check,
)
from rheo.checks.gate.report import junit_xml, render
from rheo.checks.gate.run import INSTALL_TORCH, NOTHING_CHECKED, gate_verdict, run_checks, summary
from rheo.checks.gate.supervised import run_impl_checks, run_replay

__all__ = [
    "INSTALL_TORCH",
    "MATRIX_FAMILIES",
    "NOTHING_CHECKED",
    "REAL_POLICIES",
    "REAL_PROMPT",
    "REAL_SECOND",
    "REAL_TESTS_PER_POLICY",
    "REAL_TREE",
    "control_check",
    "corpus_dir",
    "exact_matrix_check",
    "fast_calibration_check",
    "fast_cycle_law_check",
    "fast_decisions_check",
    "fast_ties_check",
    "gate_checks",
    "gate_verdict",
    "impl_checks",
    "junit_xml",
    "matrix_cases",
    "matrix_instance",
    "paper_example_check",
    "real_model_check",
    "render",
    "run_checks",
    "run_impl_checks",
    "run_replay",
    "summary",
]
