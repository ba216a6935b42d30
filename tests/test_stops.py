"""Whole generations that stop (docs/spec.md §8, "Stops"): EOS ids, stop sequences and
max_tokens; the stopped law exactly and statistically; "no token after a stop", max_tokens and
the finish reason as hard checks on every run (examples/stops.py)."""

from __future__ import annotations

import pytest

from rheo.casefile import load_case
from rheo.checks.cases.generations import stop_cases
from rheo.checks.exact.generation import certify_generation
from rheo.checks.protocol.generation import _read_generation, generation_sequence_law
from rheo.checks.protocol.inputs import law_instance
from rheo.checks.protocol.load import implementation_of
from rheo.checks.protocol.outputs import BadOutput
from rheo.reference.numbers import CaseError
from rheo.reference.stops import stops_of

CASE = {
    "name": "stops",
    "vocab_size": 3,
    "target": {"*": ["1/2", "1/3", "1/6"], "0": ["1/6", "1/2", "1/3"], "1": ["1/3", "1/6", "1/2"]},
    "draft": {"*": ["1/3", "1/3", "1/3"]},
    "depth": 2,
    "policy": "rheo",
    "K": 1,
    "beam": 1,
    "budget": 2,
    "m": 0,
    "temperature": "1",
    "n_tokens": 4,
    "stop_token_ids": [2],
}
SEQUENCE = {**CASE, "stop_token_ids": None, "stop_sequences": [[0, 1]]}


def test_the_stopped_law_ends_each_sequence_at_its_first_stop() -> None:
    law = generation_sequence_law(law_instance(CASE), 4, stops_of(CASE))
    assert abs(sum(law.values()) - 1) < 1e-12
    assert law[(2,)] == pytest.approx(1 / 6)  # EOS first: the generation is one token
    assert law[(0, 2)] == pytest.approx(1 / 2 * 1 / 3)
    assert all(2 not in seq[:-1] for seq in law) and max(map(len, law)) == 4
    seq_law = generation_sequence_law(law_instance(SEQUENCE), 4, stops_of(SEQUENCE))
    assert seq_law[(0, 1)] == pytest.approx(1 / 2 * 1 / 2)


def read(tokens, reason=None):
    res = {"tokens": tokens, **({"finish_reason": reason} if reason else {})}
    return _read_generation(res, 4, 3, stops_of(CASE))


def test_the_hard_checks() -> None:
    assert read([0, 2], "stop") == (0, 2) and read([0, 1, 0, 1], "length") == (0, 1, 0, 1)
    with pytest.raises(BadOutput, match="1 token\\(s\\) after the stop at position 1"):
        read([0, 2, 1])
    with pytest.raises(BadOutput, match="past max_tokens"):
        read([0, 1, 0, 1, 1])
    with pytest.raises(BadOutput, match="without a stop"):
        read([0, 1])
    with pytest.raises(BadOutput, match="finish_reason: 'length'"):
        read([0, 2], "length")


@pytest.mark.parametrize("case", [CASE, SEQUENCE], ids=["eos", "sequence"])
def test_a_stopping_generation_is_certified(case: dict) -> None:
    cert = certify_generation(implementation_of("examples.stops:StoppingGeneration"), case)
    assert cert.verdict == "lossless", cert.detail


@pytest.mark.parametrize(
    ("bug", "needle"),
    [
        ("StopCheckedPerCycle", "after the stop"),
        ("BonusAfterStop", "after the stop"),
        ("OvershootsMaxTokens", "past max_tokens"),
    ],
)
def test_each_planted_stop_bug_is_caught(bug: str, needle: str) -> None:
    cert = certify_generation(implementation_of(f"examples.stops:{bug}"), CASE)
    assert cert.verdict == "crashed" and needle in cert.detail, cert.detail


def test_stop_cases_are_drawn_only_for_a_declared_implementation() -> None:
    assert stop_cases("smoke") and all(c.get("stop_token_ids") or c.get("stop_sequences") for c in stop_cases("smoke"))
    from rheo.checks.gate.checklist import impl_checks
    from rheo.checks.outcome import Profile

    smoke = Profile("smoke", "smoke", 0, False, 0, 0, 0, 4000)
    loop = implementation_of("examples.loop_generation:LoopGeneration")  # no stops declared: as before
    (exact, _) = [c for c in impl_checks(loop) if "whole generations" in c.name]
    out = exact.run(smoke, None)
    assert out.verdict == "pass" and "stop" not in out.detail, out.detail


def test_a_stop_id_outside_the_vocabulary_is_refused() -> None:
    with pytest.raises(CaseError, match="stop_token_ids\\[0\\]"):
        load_case({**CASE, "stop_token_ids": [3]})
    with pytest.raises(CaseError, match="stop_sequences\\[0\\]"):
        load_case({**CASE, "stop_sequences": [[]]})
