"""SGLang's EAGLE verify step, ``eagle_sample`` called unmodified on chains drafted here
(``rheo.integrations.sglang``; docs/engines.md, "SGLang"): exact certification of each
branch it takes by platform and option. Run by ``.ci/engines`` in an SGLang venv of its own;
skipped without SGLang."""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("SGLang is not installed (bash .ci/engines makes its venv)", allow_module_level=True)

from rheo.checks.exact.certify import certify_implementation
from rheo.checks.protocol.load import load_implementation

V = 4


def chain_case(depth: int, temperature: str, seed: int, **filters: object) -> dict:
    """A chain case at V = 4: random target logits at every path, a random draft law (exact
    fractions) at every path a draft expands."""
    rng = np.random.default_rng(seed)
    paths = [p for n in range(depth + 1) for p in itertools.product(range(V), repeat=n)]
    key = ",".join

    def logits() -> list[float]:
        return [round(float(x), 3) for x in rng.normal(0, 1.5, V)]

    def law() -> list[str]:
        w = rng.integers(1, 9, V)
        return [f"{int(x)}/{int(w.sum())}" for x in w]

    return {
        "name": f"sglang-chain-D{depth}-T{temperature}-{seed}",
        "vocab_size": V,
        "arithmetic": "float64",
        "target_logits": {key(map(str, p)): logits() for p in paths},
        "draft": {key(map(str, p)): law() for p in paths if len(p) < depth},
        "depth": depth,
        "policy": "rheo",
        "K": 1,
        "m": 0,
        "budget": depth,
        "beam": 1,
        "temperature": temperature,
        **filters,
    }


def certify(adapter: str, case: dict):
    return certify_implementation(load_implementation(f"rheo.integrations.sglang:{adapter}"), case)


def test_the_cpu_branch_commits_the_argmax_for_sampled_requests() -> None:
    """SGLang's CPU build: ``_verify_uses_greedy`` is true on CPU, so at T = 1 the verify
    step serves the target's argmax; at T = 0 that is the right law."""
    sampled = certify("SglangEagleCpu", chain_case(2, "1", 0))
    assert sampled.verdict == "not lossless" and sampled.deviation is not None and sampled.deviation > 0.1
    greedy = certify("SglangEagleCpu", chain_case(2, "0", 0))
    assert greedy.verdict == "lossless", greedy.summary()


@pytest.mark.parametrize(
    "case",
    [chain_case(2, "1", 1), chain_case(2, "7/10", 2, target_top_k=3), chain_case(1, "1/2", 3, target_top_p="4/5")],
    ids=lambda c: c["name"],
)
def test_the_rejection_kernel_is_lossless(case: dict) -> None:
    """``--speculative-use-rejection-sampling`` on ROCm: the Triton chain kernel and
    renormalisation under Triton's interpreter, drafts sampled from the draft law."""
    cert = certify("SglangEagleRejection", case)
    assert cert.verdict == "lossless", cert.summary()
    assert cert.draws == "concrete"


def test_block_verification_is_lossless_exactly_at_one_draft() -> None:
    cert = certify("SglangEagleBlock", chain_case(1, "1/2", 3, target_top_p="4/5"))
    assert cert.verdict == "lossless", cert.summary()


def test_block_verification_beyond_one_draft_is_judged_statistically() -> None:
    """Block verification reads its coins from the last draft back: the first coin's cells
    move with the second's, which exact certification cannot follow (it says so, naming the
    draw); 3,000 cycles judge the output law instead."""
    import torch

    from rheo.checks.protocol.inputs import law_instance
    from rheo.checks.protocol.judged import judged_instance
    from rheo.checks.statistics.goodness_of_fit import gof
    from rheo.checks.statistics.output_law import output_law_shard, sequence_law

    case = chain_case(2, "1", 1)
    cert = certify("SglangEagleBlock", case)
    assert cert.verdict == "unsupported" and "torch.rand_like" in cert.summary()
    impl = load_implementation("rheo.integrations.sglang:SglangEagleBlock")
    torch.manual_seed(0)
    counts = output_law_shard(impl, case, 3000, seed=0)
    res = gof(counts, sequence_law(judged_instance(impl, law_instance(case))), alpha=1e-6)
    assert not res.reject and not res.impossible, (res.statistic, res.p_value)


def test_ties_at_the_top_k_pivot_are_kept_as_sglang_keeps_them() -> None:
    """SGLang's renormalisation keeps every token tied with the k-th (FlashInfer's semantics),
    unlike docs/spec.md §0's token-id tie-break: its ``sampler_law`` says so, and the verify
    step is exactly lossless against it on a case whose top-k cut falls inside a tie."""
    from rheo.integrations.sglang import renormalised_law

    law = renormalised_law(np.array([0.0, -0.5, -0.5]), 1.5, 2, None)
    assert np.all(law > 0) and law[1] == law[2]
    case = chain_case(1, "3/2", 4, target_top_k=2)
    case["target_logits"] = {k: [0.0, -0.5, -0.5, -3.0] for k in case["target_logits"]}
    cert = certify("SglangEagleRejection", case)
    assert cert.verdict == "lossless", cert.summary()
