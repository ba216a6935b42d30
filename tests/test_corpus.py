"""Replay the counterexample corpus: every saved case still gives its expected deviation."""

from pathlib import Path

import pytest

from rheo.casefile import load_case, read_case
from rheo.reference import certify

CASES = sorted((Path(__file__).resolve().parent.parent / "cases").glob("*.json"))


def test_corpus_is_not_empty():
    assert len(CASES) >= 9


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_corpus_case_replays_exactly(path):
    case = read_case(path)
    expected = case["expected"]
    report = certify(load_case(case), count_draws=False)
    j = report.to_json()
    assert j["lossless"] == expected["lossless"]
    assert j["max_abs_deviation"] == expected["max_abs_deviation"]
    assert j["worst_sequence"] == expected["worst_sequence"]
