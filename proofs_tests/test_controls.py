"""Every wrong-on-purpose variant (docs/spec.md §2-§4) has a counterexample that Hypothesis finds
and shrinks; the saved corpus holds one per control."""

import json
from pathlib import Path

import pytest

from rheo.checks.cases.corpus import CONTROLS, CONTROLS_BY_NAME, find_counterexample

from .helpers import describe, report

CORPUS = Path(__file__).resolve().parent.parent / "cases"
# the three proxy controls are searched in test_lemma1.py
VERIFIER_AND_TREE_CONTROLS = [
    "sample_last",
    "draft_law_dense",
    "draft_law_untempered",
    "tie_break_token",
    "class_law_depth2",
]


@pytest.mark.parametrize("name", VERIFIER_AND_TREE_CONTROLS)
def test_wrong_variant_has_a_counterexample(name):
    case = find_counterexample(CONTROLS_BY_NAME[name])
    r = report(case)
    assert r.deviation.value > 0, describe(case)
    assert r.deviation.continued != r.deviation.target


@pytest.mark.parametrize("control", CONTROLS, ids=lambda c: c.name)
def test_every_control_has_a_saved_counterexample(control):
    path = CORPUS / f"control-{control.name}.json"
    assert path.exists(), f"run `python -m rheo.checks.cases.corpus cases` to save {path.name}"
    saved = json.loads(path.read_text())
    assert saved["expected"]["control"] == control.name
    assert saved["expected"]["lossless"] is False
