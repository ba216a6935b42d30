"""The peer-design adapters in examples/ (EAGLE, SGLang and transformers styles, and the
loop implementation's further variants) speak the ``--impl`` protocol: well-formed trees
and results on small float64 cases. Statistical sanity (fixed seeds): every lossless one
emits the target's first-token law over 6,000 to 8,000 cycles (each token within 5 standard
errors, a two-sided false-alarm rate under 1e-6 per token; a probability-0 token never
appears), and the lossy ones visibly miss it (beyond 5 standard errors). The proof that each
is lossless, or not, is exact: tests/test_exact_impl.py."""

import ast
import doctest
import importlib
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from rheo.casefile import load_case
from rheo.checks.protocol.calls import call_build_tree, call_verify, impl_cycle
from rheo.checks.protocol.inputs import protocol_config, reference_tree
from rheo.checks.protocol.load import Implementation
from rheo.reference import UniformChooser, Uniforms, make_instance
from rheo.reference.generate import hashed_case
from rheo.reference.tree import build_tree

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from examples.buggy_impl import IgnoresDraftTopK, SkippedFilters, UntemperedResidual  # noqa: E402
from examples.eagle_style import EagleReleaseBonusBug, EagleVerifier  # noqa: E402
from examples.sglang_style import SGLangThreshold, SGLangVerifier  # noqa: E402
from examples.transformers_style import ChainVerifier, EarlyStopChain, GreedyDraftChain  # noqa: E402

PEER_MODULES = ["examples.eagle_style", "examples.sglang_style", "examples.transformers_style"]
OWN_RANDOMNESS = [EagleVerifier, EagleReleaseBonusBug, SGLangVerifier, SGLangThreshold, ChainVerifier]
OWN_RANDOMNESS += [GreedyDraftChain, EarlyStopChain]
ALL = OWN_RANDOMNESS + [SkippedFilters, IgnoresDraftTopK, UntemperedResidual]

SHAPE_CASES = {
    "rheo_m1_top_p": hashed_case(4, 1, 2, policy="rheo", K=3, m=1, budget=4, temperature="1/2", target_top_p="9/10"),
    "topk_min_p": hashed_case(4, 2, 2, policy="topk", K=2, budget=3, temperature="1", target_min_p="1/10"),
    "rheo_m0_greedy_top_k": hashed_case(3, 3, 2, policy="rheo", K=3, m=0, budget=5, temperature="0", target_top_k=2),
    "chain_sparse": hashed_case(4, 4, 3, policy="rheo", K=1, m=0, budget=3, temperature="1/3", draft_top_k=2),
    "chain_greedy_budget_1": hashed_case(3, 5, 2, policy="rheo", K=1, m=0, budget=1, temperature="0"),
}

P, Q = ["1/5", "1/2", "3/10"], ["1/2", "3/10", "1/5"]  # docs/spec.md §6's laws, at every prefix
TREE = make_instance(
    3, P, Q, policy="rheo", K=3, m=1, depth=2, budget=3, temperature="1/2", target_top_k=2, arithmetic="float64"
)
TREE_SPARSE = make_instance(
    3, P, Q, policy="rheo", K=3, m=1, depth=2, budget=3, temperature="1/2", draft_top_k=2, arithmetic="float64"
)
CHAIN = make_instance(
    3, P, Q, policy="rheo", K=1, m=0, depth=2, budget=2, temperature="1/2", draft_top_k=2, arithmetic="float64"
)


def cycles(impl, inst, n: int, seed: int = 0) -> list[tuple]:
    """n cycles through the protocol; the reference builds the tree for a verifier only."""
    torch.manual_seed(seed)
    random.seed(seed)
    rng = np.random.default_rng(seed)
    c = inst.config
    wrapped = Implementation(impl, type(impl).__name__)
    return [impl_cycle(wrapped, inst, Uniforms.random(rng, c.K, c.B, c.depth)) for _ in range(n)]


def worst_z(counts: np.ndarray, law) -> float:
    """The largest |count - N p| in standard errors; inf for a probability-0 token seen."""
    p = np.array([float(x) for x in law])
    n = counts.sum()
    sd = np.sqrt(n * p * (1 - p))
    gap = np.abs(counts - n * p)
    return float(max(g / s if s > 0 else (np.inf if g > 0 else 0.0) for g, s in zip(gap, sd)))


def first_token_z(impl, inst, n: int) -> float:
    counts = np.bincount([out[0] for out in cycles(impl, inst, n)], minlength=inst.n)
    return worst_z(counts, inst.target_law(()))


@pytest.mark.parametrize("name", PEER_MODULES)
def test_peer_examples_import_nothing_from_rheo_and_their_docstrings_run(name):
    tree = ast.parse((ROOT / (name.replace(".", "/") + ".py")).read_text(encoding="utf-8"))
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in imported if m.split(".")[0] == "rheo"]
    assert doctest.testmod(importlib.import_module(name)).failed == 0


def test_own_randomness_is_declared():
    assert all(cls.follows_uniforms is False for cls in OWN_RANDOMNESS)
    assert all(getattr(cls, "follows_uniforms", True) for cls in (SkippedFilters, IgnoresDraftTopK, UntemperedResidual))


def test_chain_designs_support_only_chains_and_greedy_drafting_only_above_zero_temperature():
    for name, case in SHAPE_CASES.items():
        config = protocol_config(load_case({**case, "arithmetic": "float64"}))
        chain = name.startswith("chain")
        assert ChainVerifier().supports(config) == EarlyStopChain().supports(config) == chain, name
        assert GreedyDraftChain().supports(config) == (chain and config["temperature"] > 0), name


def supported_pairs():
    """(class, case name) for every shape case the class supports."""
    for name, case in SHAPE_CASES.items():
        config = protocol_config(load_case({**case, "arithmetic": "float64"}))
        for cls in ALL:
            if Implementation(cls(), cls.__name__).supports(config):
                yield pytest.param(cls, name, id=f"{cls.__name__}-{name}")


@pytest.mark.parametrize(("cls", "case_name"), list(supported_pairs()))
def test_protocol_results_are_well_formed(cls, case_name):
    """Trees pass the harness's reader (chains: every node a sample in slot 0 under the node
    before it, its token in the law it reports); every result is a root-to-leaf run of
    accepted nodes and one more token."""
    inst = load_case({**SHAPE_CASES[case_name], "arithmetic": "float64"})
    impl = Implementation(cls(), cls.__name__)
    c = inst.config
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    for _ in range(20):
        u = Uniforms.random(rng, c.K, c.B, c.depth)
        if impl.builds_trees:
            tree = call_build_tree(impl, inst, u)
            assert 1 <= len(tree["tokens"]) <= c.budget and max(map(len, tree["paths"])) <= c.depth
            if cls in (GreedyDraftChain, EarlyStopChain):
                n = len(tree["tokens"])
                assert tree["parents"] == list(range(-1, n - 1)) and set(tree["kinds"]) == {1}
                assert set(tree["slots"]) == {0}
                assert np.allclose(tree["sample_probs"].sum(axis=1), 1, atol=1e-6)
                assert all(tree["sample_probs"][i, t] > 0 for i, t in enumerate(tree["tokens"]))
        else:
            tree = reference_tree(inst, build_tree(inst, UniformChooser(u)))
        tokens, accepted = call_verify(impl, inst, tree, u)
        assert len(tokens) == len(accepted) + 1 <= c.depth + 1
        assert all(0 <= t < inst.n for t in tokens)
        assert [tree["parents"][i] for i in accepted] == ([-1] + accepted)[: len(accepted)]
        assert list(tokens[:-1]) == [tree["tokens"][i] for i in accepted]


@pytest.mark.parametrize(
    ("cls", "inst", "n"),
    [
        pytest.param(EagleVerifier, TREE, 8_000, id="EagleVerifier"),
        pytest.param(SGLangVerifier, TREE, 8_000, id="SGLangVerifier"),
        pytest.param(ChainVerifier, CHAIN, 8_000, id="ChainVerifier"),
        # builders cost more per cycle: fewer cycles, the same 5-standard-error bound
        pytest.param(EarlyStopChain, CHAIN, 6_000, id="EarlyStopChain"),
        pytest.param(IgnoresDraftTopK, TREE_SPARSE, 6_000, id="IgnoresDraftTopK"),
        pytest.param(UntemperedResidual, TREE, 6_000, id="UntemperedResidual"),
    ],
)
def test_lossless_designs_emit_the_target_first_token_law(cls, inst, n):
    """V = 3, depth 2, T = 1/2 (target top-k 2 on the tree case: a probability-0 token must
    never come out; draft top-k 2 on the others)."""
    assert first_token_z(cls(), inst, n) < 5


@pytest.mark.parametrize(
    ("cls", "inst"),
    [
        # token 1 (p_T = 0.74) is a child of every root and is accepted outright
        pytest.param(SGLangThreshold, TREE, id="SGLangThreshold"),
        # token 0 is drafted every time, yet verified as if drawn with q_T(0) = 0.74
        pytest.param(GreedyDraftChain, CHAIN, id="GreedyDraftChain"),
        # emits token 0, which target top-k 2 removes
        pytest.param(SkippedFilters, TREE, id="SkippedFilters"),
    ],
)
def test_lossy_designs_miss_the_target_first_token_law(cls, inst):
    """4,000 cycles on the cases above: the first-token law is off by far more than 5
    standard errors."""
    assert first_token_z(cls(), inst, 4_000) > 5


def test_eagle_release_bonus_bug_draws_the_bonus_from_raw_logits():
    """Top-K, depth 1, budget 1, T = 1/2: the one child (token 1) is accepted about 2/3 of
    the time and the bonus follows it; the bonus law must be p_T = p^2 renormalised
    (about 0.11, 0.66, 0.24), the bug draws it from p = (0.2, 0.5, 0.3)."""
    inst = make_instance(
        3, P, ["3/10", "1/2", "1/5"], policy="topk", K=1, depth=1, budget=1, temperature="1/2", arithmetic="float64"
    )
    law = inst.target_law((1,))

    def bonus_z(impl) -> float:
        outs = cycles(impl, inst, 4_000)
        counts = np.bincount([o[1] for o in outs if len(o) == 2], minlength=3)
        assert counts.sum() > 2_000
        return worst_z(counts, law)

    assert bonus_z(EagleVerifier()) < 5
    assert bonus_z(EagleReleaseBonusBug()) > 5
