"""The ``rheo_checker`` pytest fixture on an implementation, as a user's test suite would
hold it (docs/gate.md, "From pytest: the rheo_checker fixture"). Run it with

    pytest examples/test_with_rheo_checker.py

from the repository root. Installing rheosampling registers the fixture; nothing to import
for it. Replace ``LoopImplementation`` with your engine's adapter (an object, or a
"module:Object" / "path/to/file.py:Object" string).
"""

import pytest

from examples.buggy_impl import ReusedUniform
from examples.loop_impl import LoopImplementation


@pytest.fixture
def checker(rheo_checker):
    """Smaller than the gate's quick profile, so the example runs in seconds: the smoke case
    matrix (11 exact cases, 3 output-law cases), 2,000 cycles per output-law case, 100
    decision-equality examples, no extra exact search, 300 cycles per large case."""
    rheo_checker.level = "smoke"
    rheo_checker.cycles = 2_000
    rheo_checker.examples = 100
    rheo_checker.exact_search = 0
    rheo_checker.prefix_cycles = 300  # per large case (V up to 1,024) of the output law beyond exact reach
    return rheo_checker


def test_my_implementation_is_lossless(checker):
    """Every check ``rheo gate --impl`` runs; a failure raises AssertionError naming the
    check, its shrunk difference and the counterexample file (under the test's tmp_path)."""
    results = checker.check(LoopImplementation())
    # at least these (a later version of the gate may add checks: assert what you rely on)
    assert {r.name.split(" (")[0] for r in results} >= {
        "impl: decision equality",
        "impl: exact certification",
        "impl: output law",
        "impl: output law, beyond exact reach",
        "impl: real vocabulary sizes, exactly",
        "impl: rows without a law",
    }


def test_a_planted_bug_is_caught(checker):
    """An "is caught" test: keep one of these for each bug your engine once shipped, so that
    the gate is proven to see it. ``ReusedUniform`` reuses one uniform for two decisions.
    One check at a time returns its ``Outcome`` (verdict, detail, counterexample, data)."""
    outcome = checker.exact(ReusedUniform())
    assert outcome.verdict == "fail", outcome.detail
    assert outcome.detail.startswith("not lossless")
    worst = outcome.counterexample  # what the gate writes as the counterexample file
    assert worst["check"] == "exact certification" and worst["case"]["vocab_size"] <= 4
