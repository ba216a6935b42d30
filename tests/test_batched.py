"""The batched torch protocol (rheo.checks.statistics.batched): the fastpath run through it is lossless
in law at batch scale and on a 32,000-token vocabulary; planted bugs in the same shape are
caught; malformed answers are findings; continuing outputs by multinomial draws per output
has the law of continuing each copy."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rheo.checks.gate.checklist import impl_checks  # noqa: E402
from rheo.checks.protocol.inputs import law_instance  # noqa: E402
from rheo.checks.protocol.load import Implementation, load_implementation  # noqa: E402
from rheo.checks.protocol.outputs import BadOutput  # noqa: E402
from rheo.checks.statistics.batched import (  # noqa: E402
    check_large_vocabulary,
    check_output_law_batched,
    continued_counts,
    read_result_batch,
)
from rheo.checks.statistics.goodness_of_fit import gof  # noqa: E402
from rheo.integrations.fastpath_protocol import Fastpath, FastpathOwnGenerator, FastpathPerRequest  # noqa: E402
from rheo.testing.protocol import ReusedUniformBatched, SampleLastBatched  # noqa: E402

CASE = {
    "name": "tree",
    "vocab_size": 3,
    "target": {"*": ["1/2", "1/4", "1/4"]},
    "draft": {"*": ["1/6", "1/3", "1/2"]},
    "policy": "rheo",
    "K": 2,
    "m": 1,
    "depth": 2,
    "budget": 3,
}


@pytest.mark.parametrize("impl", [Fastpath, FastpathOwnGenerator], ids=lambda c: c.__name__)
def test_the_fastpath_through_the_batched_protocol_is_lossless(impl):
    r = check_output_law_batched(Implementation(impl(), impl.__name__), 50_000, level="smoke")
    assert r.passed and r.detail.startswith("lossless on 3 cases, each within detectable TV"), r.detail
    assert r.data["cycles_per_second"] > 0 and r.data["device"] == "cpu"


@pytest.mark.parametrize(
    "impl, cycles",
    [(ReusedUniformBatched, 300_000), (SampleLastBatched, 300_000)],
    ids=lambda c: getattr(c, "__name__", c),
)
def test_planted_bugs_through_the_batched_protocol_are_caught(impl, cycles):
    """One uniform used for two decisions, and the stochastic step verified last: the quick
    cases' output law, 300,000 cycles each, rejects both (with the worst sequences)."""
    r = check_output_law_batched(Implementation(impl(), impl.__name__), cycles, level="quick")
    assert not r.passed and r.detail.startswith("not lossless on "), r.detail
    worst = r.counterexample["worst_sequences"][0]
    assert worst["observed"] != pytest.approx(worst["p_T"], abs=1e-3)


def test_the_large_vocabulary_check_runs_the_first_and_second_tokens():
    r = check_large_vocabulary(Implementation(Fastpath(), "f"), 2_000)
    assert r.passed, r.detail
    assert list(r.data["tests"])[0] == "first token" and len(r.data["tests"]) == 4
    assert "V=32000, draft_top_k 128, K=4, depth 6, budget 16" in r.detail


def test_the_gate_lists_the_batched_checks_for_a_batched_implementation():
    impl = load_implementation("rheo.integrations.fastpath_protocol:Fastpath")
    assert impl.batched and not impl.per_request
    assert [c.name for c in impl_checks(impl)] == [
        "impl: output law, batched (batched tree builder and batched verifier)",
        "impl: large vocabulary, batched (batched tree builder and batched verifier)",
    ]
    assert all(c.needs_torch for c in impl_checks(impl))


class Answers(Fastpath):
    def __init__(self, tamper):
        self.tamper = tamper

    def verify_batch(self, tree, target_logits, params, temperature, uniforms):
        res = super().verify_batch(tree, target_logits, params, temperature, uniforms)
        return self.tamper({"tokens": res.tokens, "lengths": res.lengths})


@pytest.mark.parametrize(
    "tamper, needle",
    [
        (lambda r: {**r, "tokens": r["tokens"].double()}, "tokens must hold integers; got torch.float64"),
        (lambda r: {**r, "tokens": r["tokens"].numpy()}, "tokens must be a torch tensor, got ndarray"),
        (lambda r: {**r, "tokens": r["tokens"][:, :1]}, "tokens has shape"),
        (lambda r: {**r, "lengths": r["lengths"] * 0}, "lengths: request 0 has length 0"),
        (lambda r: {**r, "tokens": r["tokens"] + 5}, "outside 0..2"),
        (lambda r: {"tokens": r["tokens"]}, "expected a VerifyResult or a dict with tokens and lengths"),
    ],
    ids=["floats", "numpy", "shape", "length 0", "out of vocabulary", "no lengths"],
)
def test_a_malformed_batched_answer_is_a_finding_that_names_the_field(tamper, needle):
    r = check_output_law_batched(Implementation(Answers(tamper), "a"), 100, level="smoke", extra_cases=[CASE])
    assert not r.passed and "broke the protocol" in r.detail and needle in r.detail, r.detail


def test_read_result_batch_accepts_a_verify_result_and_a_dict():
    tokens = torch.tensor([[1, 2, -1], [0, -1, -1]])
    lengths = torch.tensor([2, 1])
    got = read_result_batch({"tokens": tokens, "lengths": lengths}, 2, 2, 3)
    assert torch.equal(got[0], tokens) and torch.equal(got[1], lengths)
    with pytest.raises(BadOutput, match="request 1 emits -1 at position 1"):
        read_result_batch({"tokens": tokens, "lengths": torch.tensor([2, 2])}, 2, 2, 3)


def test_continuing_each_output_by_one_multinomial_has_the_continued_law():
    """c copies of output o continued together (a multinomial over p_T(rest | o)) against the
    exact law of continuing o: c p_T(o + rest) / p_T(o)."""
    inst = law_instance(CASE)
    outputs = Counter({(0,): 200_000, (1, 2): 50_000, (2, 0, 1): 7})
    got = continued_counts(outputs, inst, np.random.default_rng(0))
    assert sum(got.values()) == sum(outputs.values()) and got[(2, 0, 1)] == 7
    p0 = {seq: float(np.prod([inst.target_law(seq[:k])[seq[k]] for k in range(1, 3)])) for seq in got if seq[0] == 0}
    r = gof(Counter({s: c for s, c in got.items() if s[0] == 0}), p0, 1e-6)
    assert not r.reject and r.bins == 9, r.describe()
    assert all(s[:2] == (1, 2) for s, c in got.items() if s[0] == 1)


def test_the_fastpath_through_the_per_request_protocol_is_the_reference():
    """The same fastpath, one request per call (trees converted by tree_formats): decision
    equality with the reference and exact certification pass."""
    from rheo.checks.differential.decision_equality import check_decisions
    from rheo.checks.exact.certify import certify_implementation

    impl = Implementation(FastpathPerRequest(), "per request")
    r = check_decisions(impl, 60, 0, min_compared=20)
    assert r.passed, r.detail
    assert certify_implementation(impl, CASE).verdict == "lossless"
