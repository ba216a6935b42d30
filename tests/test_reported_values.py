"""Reported values (docs/adapters.md, "Reported values"): log-probabilities beside the tokens,
each checked against the declared law on every run of every check (examples/logprobs.py)."""

from __future__ import annotations

import pytest

from rheo.checks.exact.certify import certify_implementation
from rheo.checks.gate.coverage import supported_cases
from rheo.checks.protocol.calls import call_cycle
from rheo.checks.protocol.inputs import law_instance
from rheo.checks.protocol.load import Implementation, implementation_of, load_implementation
from rheo.checks.protocol.outputs import BadOutput

CASE = {
    "name": "chain V=3 D=2 T=1/2 top_k 2",
    "vocab_size": 3,
    "target": {"*": ["1/2", "1/3", "1/6"], "0": ["1/6", "1/2", "1/3"], "1": ["1/3", "1/6", "1/2"]},
    "draft": {"*": ["1/6", "1/2", "1/3"]},
    "depth": 2,
    "policy": "rheo",
    "K": 1,
    "beam": 1,
    "budget": 2,
    "m": 0,
    "temperature": "1/2",
    "target_top_k": 2,
}


def certify(name: str):
    return certify_implementation(implementation_of(f"examples.logprobs:{name}"), CASE)


@pytest.mark.parametrize("name", ["ChainWithLogprobs", "RawLogprobs"])
def test_right_values_of_the_declared_law_pass(name: str) -> None:
    cert = certify(name)
    assert cert.verdict == "lossless", cert.detail


@pytest.mark.parametrize(
    ("name", "where"), [("DraftLogprobs", "at position 0"), ("RowBeforeLogprobs", "at position 1")]
)
def test_each_planted_logprob_bug_is_caught(name: str, where: str) -> None:
    cert = certify(name)
    assert cert.verdict == "crashed" and "processed logprob" in cert.detail and where in cert.detail, cert.detail


def test_raw_values_declared_processed_are_caught() -> None:
    """The raw log softmax at T = 1/2 with a top-k is another law than the processed one."""
    impl = load_implementation("examples.logprobs:RawLogprobs")  # a fresh object: it is changed here
    impl.obj.logprobs = "processed"
    cert = certify_implementation(impl, CASE)
    assert cert.verdict == "crashed" and "processed logprob" in cert.detail, cert.detail


def test_undeclared_logprobs_are_refused_with_the_fix() -> None:
    impl = load_implementation("examples.logprobs:ChainWithLogprobs")  # a fresh object: it is changed here
    impl.obj.logprobs = None
    with pytest.raises(BadOutput, match='logprobs = "processed" or "raw"'):
        for _ in range(5):
            call_cycle(impl, law_instance(CASE))


class TopN:
    """Reports the top-2 of the processed law at each position, one of them wrong."""

    follows_uniforms = False
    logprobs = "processed"

    def __init__(self, wrong: bool) -> None:
        self.wrong = wrong

    def cycle(self, draft_logits, target_logits, config, temperature):
        import math

        return {"tokens": [0], "top_logprobs": [{0: math.log(0.6), 1: math.log(0.4) + (0.1 if self.wrong else 0)}]}


def test_top_n_logprobs_are_each_checked() -> None:
    case = {**CASE, "depth": 1, "budget": 1, "temperature": "1", "target_top_k": 2}
    case["target"] = {"*": ["3/5", "2/5", "0"]}
    inst = law_instance(case)
    assert call_cycle(Implementation(TopN(False), "t"), inst) == (0,)
    with pytest.raises(BadOutput, match="token 1 at position 0"):
        call_cycle(Implementation(TopN(True), "t"), inst)


def test_every_supported_smoke_case_checks_the_values() -> None:
    impl = implementation_of("examples.logprobs:ChainWithLogprobs")
    cases = supported_cases(impl, "exact", "smoke").cases
    assert all(certify_implementation(impl, c).verdict == "lossless" for c in cases[:4])
