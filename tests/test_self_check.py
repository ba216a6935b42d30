"""The reference's target law against an independent one (rheo.checks.exact.self_check):
equal wherever the reference is right, and a wrong filter composition in the reference,
which its own certificates cannot see, fails ``rheo exact`` and the gate's exact matrix."""

from __future__ import annotations

import json
from fractions import Fraction as F

import pytest

import rheo.reference.numbers as numbers
from rheo.casefile import load_case
from rheo.checks.exact.self_check import independent_law, self_check
from rheo.checks.gate import MATRIX_FAMILIES, exact_matrix_check, matrix_cases
from rheo.checks.outcome import PROFILES
from rheo.cli import main
from rheo.reference import certify

COMPOSED = {  # the filter pair of issue 24: top_k 3 then top_p 3/4 on (2/5, 3/10, 1/5, 1/10)
    "vocab_size": 4,
    "target": {"*": ["2/5", "3/10", "1/5", "1/10"]},
    "draft": {"*": ["1/4", "1/4", "1/4", "1/4"]},
    "policy": "rheo",
    "K": 2,
    "m": 1,
    "depth": 1,
    "budget": 2,
    "target_top_k": 3,
    "target_top_p": "3/4",
}


def deferred_top_k(vec, k, deadline=None):
    """The mutant: top_k zeroes the rest but leaves renormalising to the next filter."""
    keep = set(numbers.rank_order(vec, deadline)[:k])
    return tuple(x if i in keep else x * 0 for i, x in enumerate(vec))


def test_the_independent_law_gives_the_hand_computed_composition():
    law, decided = independent_law(load_case(COMPOSED), ())
    assert law == (F(4, 7), F(3, 7), F(0), F(0)) and decided


@pytest.mark.parametrize("family", MATRIX_FAMILIES)
def test_the_reference_agrees_with_the_independent_law_on_the_matrix(family):
    checked = 0
    for case in matrix_cases(family, "smoke")[::3]:
        inst = load_case(case)
        certify(inst, count_draws=False)
        result = self_check(inst)
        assert result.passed, result.detail()
        checked += result.prefixes
    assert checked > 20


def test_a_wrong_composition_is_lossless_to_the_certificate_but_fails_the_self_check(monkeypatch):
    monkeypatch.setattr(numbers, "keep_top_k", deferred_top_k)
    inst = load_case(COMPOSED)
    assert certify(inst).lossless  # the certificate compares with the same wrong p_T
    result = self_check(inst)
    assert not result.passed and result.prefix == ()
    assert result.reference == [F(4, 9), F(1, 3), F(2, 9), F(0)]
    assert "reference self-check failed" in result.detail()


def test_rheo_exact_exits_1_with_the_self_check_in_its_json(monkeypatch, tmp_path, capsys):
    path = tmp_path / "composed.json"
    path.write_text(json.dumps(COMPOSED))
    assert main(["exact", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["self_check"]["passed"] is True
    monkeypatch.setattr(numbers, "keep_top_k", deferred_top_k)
    assert main(["exact", str(path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["lossless"] is True and out["self_check"]["passed"] is False
    assert out["self_check"]["independent"] == ["4/7", "3/7", "0", "0"]


def test_the_gate_matrix_fails_on_the_wrong_composition(monkeypatch):
    monkeypatch.setattr(numbers, "keep_top_k", deferred_top_k)
    check = exact_matrix_check(MATRIX_FAMILIES[-1])
    outcome = check.run(PROFILES["smoke"], None)
    assert outcome.verdict == "fail" and "reference self-check failed" in outcome.detail
    assert outcome.data["self_check"]["passed"] is False


def test_a_float_decision_at_its_threshold_is_set_aside_not_failed():
    case = {
        **COMPOSED,
        "target": {"*": [0.5, 0.25, 0.25, 0.0]},
        "arithmetic": "float64",
        "target_top_k": None,
        "target_top_p": 0.75,
    }
    inst = load_case(case)
    _, decided = independent_law(inst, ())
    assert not decided  # 0.5 + 0.25 is exactly 0.75: float rounding may keep the third token or not
    assert self_check(inst).passed
