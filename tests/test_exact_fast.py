"""rheo.checks.exact's one-pass enumeration (``method="fast"``, the default) against the first
way (``method="replay"``): the same law, bit for bit, on example implementations lossless and
lossy, with their own draws, with handed uniforms and with whole cycles; and the soundness
probes still catch randomness that escaped (docs/gate.md, "Exact certification")."""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
import pytest

from rheo.checks.exact.certify import certify_implementation
from rheo.checks.exact.tracer import enumerate_runs, probe_runs
from rheo.checks.protocol.load import Implementation, load_implementation
from rheo.reference.generate import hashed_case

torch = pytest.importorskip("torch")

TREE = hashed_case(4, 0, 2, max_weight=9, policy="rheo", K=2, m=1, budget=3, beam=1)  # eagle's bench shape, smaller
TREE_T = hashed_case(3, 1, 2, policy="rheo", K=2, m=1, budget=3, beam=2, temperature="1/2")
CHAIN = hashed_case(3, 3, 3, policy="rheo", K=1, m=0, budget=3, beam=1, temperature="1/2")
FILTERED = hashed_case(
    4, 4, 2, policy="rheo", K=3, m=1, budget=4, beam=2, temperature="1", target_top_k=2, target_top_p="9/10"
)

CASES = [
    ("examples.eagle_style:EagleVerifier", TREE),
    ("examples.eagle_style:EagleVerifier", FILTERED),
    ("examples.eagle_style:EagleReleaseBonusBug", TREE_T),
    ("examples.sglang_style:SGLangVerifier", TREE),
    ("examples.sglang_style:SGLangThreshold", TREE_T),
    ("examples.transformers_style:ChainVerifier", CHAIN),
    ("examples.transformers_style:EarlyStopChain", CHAIN),  # builds its trees with its own draws
    ("examples.transformers_style:GreedyDraftChain", CHAIN),
    ("examples.loop_impl:LoopImplementation", TREE_T),  # handed uniforms
    ("examples.buggy_impl:TokenTieBreak", TREE_T),
    ("examples.buggy_impl:ReusedUniform", TREE_T),
    ("examples.buggy_impl:SkippedFilters", FILTERED),
]


def both(impl: Implementation, case: dict):
    return (certify_implementation(impl, case, method=m) for m in ("replay", "fast"))


def assert_same(old, new) -> None:
    assert (new.verdict, new.detail) == (old.verdict, old.detail), (old.summary(), new.summary())
    assert new.law == old.law  # the same leaves in the same order: the same floats
    assert (new.deviation, new.backend_deviation, new.tolerance) == (
        old.deviation,
        old.backend_deviation,
        old.tolerance,
    )
    assert (new.trees, new.outputs, new.sequence) == (old.trees, old.outputs, old.sequence)
    assert new.runs <= old.runs


@pytest.mark.parametrize("spec, case", CASES, ids=[f"{s.split(':')[1]}-{i}" for i, (s, _) in enumerate(CASES)])
def test_the_fast_path_gives_the_replay_paths_law(spec, case):
    old, new = both(load_implementation(spec), case)
    assert old.verdict in ("lossless", "not lossless"), old.summary()
    assert_same(old, new)


def test_the_lossy_examples_stay_lossy():
    for spec, case in [
        ("examples.eagle_style:EagleReleaseBonusBug", TREE_T),
        ("examples.buggy_impl:ReusedUniform", TREE_T),
    ]:
        assert certify_implementation(load_implementation(spec), case).verdict == "not lossless"


class WholeCycle:
    """transformers_style's sampled-drafting chain as one ``cycle`` call (its own draws)."""

    def __init__(self) -> None:
        from examples.transformers_style import EarlyStopChain

        self.inner = EarlyStopChain()
        self.supports = self.inner.supports
        self.sampler_law = self.inner.sampler_law

    def cycle(self, draft_logits, target_logits, config, temperature):
        tree = self.inner.build_tree(draft_logits, config, temperature, None)
        tokens = np.asarray(tree["tokens"]).tolist()
        paths = [()] + [tuple(tokens[: i + 1]) for i in range(len(tokens))]
        return self.inner.verify(tree, target_logits(paths), config, temperature, {})["tokens"]


def test_whole_cycles_give_the_same_law():
    old, new = both(Implementation(WholeCycle(), "whole cycle"), CHAIN)
    assert old.verdict == "lossless"
    assert_same(old, new)


class UrandomCoin:
    """A coin on os.urandom beside an intercepted one: the probes must see it."""

    follows_uniforms = False

    def verify(self, tree, target_logits, config, temperature, uniforms):
        import os

        first = random.random() < 0.5
        return {"tokens": [int(first) ^ (os.urandom(1)[0] & 1)], "accepted": []}


class HandedButDraws:
    follows_uniforms = True

    def verify(self, tree, target_logits, config, temperature, uniforms):
        return {"tokens": [int(uniforms["u_final"][0] < 0.5) ^ int(random.random() < 0.5)], "accepted": []}


@pytest.mark.parametrize(
    "obj, needle",
    [(UrandomCoin(), "randomness this check does not intercept"), (HandedButDraws(), "drew its own randomness")],
    ids=["os.urandom", "handed but draws"],
)
def test_escaped_randomness_is_still_reported(obj, needle):
    topk = hashed_case(4, 2, 2, policy="topk", K=2, budget=4, beam=2, temperature="1")
    old, new = both(Implementation(obj, "escape"), topk)
    assert new.verdict == old.verdict == "unsupported" and needle in new.detail, new.summary()


P32 = torch.tensor([0.1, 0.35, 0.55], dtype=torch.float32)

FUNCTIONS = [
    lambda: bool(random.random() <= P32[0]),  # a Python coin rounded to float32 (EAGLE's)
    lambda: bool(random.random() < 0.3),
    lambda: bool(0.3 >= random.random()),
    lambda: bool(np.float32(0.3) > np.random.random()),
    lambda: bool(1 - random.random() >= 0.7),  # a mapped uniform: bisected
    lambda: tuple((torch.rand(3) < P32).tolist()),
    lambda: tuple((torch.rand_like(P32.double()) <= P32.double()).tolist()),
    lambda: bool(torch.rand(1) > torch.tensor([0.25])),
    lambda: int(np.searchsorted(np.cumsum([0.2, 0.5, 0.3]), np.random.default_rng().random(), side="right")),
    lambda: int(torch.multinomial(P32, 1)),
    lambda: int(torch.argmax(torch.log(P32) - torch.log(-torch.log(torch.rand(3))))),  # Gumbel-max
    lambda: [random.random() < 0.5 and random.random() < 0.25 for _ in range(3)],
]


@pytest.mark.parametrize("fn", FUNCTIONS, ids=[str(i) for i in range(len(FUNCTIONS))])
def test_the_leaves_are_the_same_one_by_one(fn):
    old = list(enumerate_runs(fn, [], 10**5, [0], method="replay"))
    new = list(enumerate_runs(fn, [], 10**5, [0], method="fast"))
    assert [(x.prob, x.prob_backend, x.result, x.script, x.bits) for x in new] == [
        (x.prob, x.prob_backend, x.result, x.script, x.bits) for x in old
    ]


def test_every_fast_run_ends_in_a_leaf():
    runs: dict[str, list[int]] = {"replay": [0], "fast": [0]}
    leaves = {m: list(enumerate_runs(FUNCTIONS[-1], [], 10**5, runs[m], method=m)) for m in runs}
    assert runs["fast"][0] == len(leaves["fast"]) == len(leaves["replay"]) < runs["replay"][0]


def test_fast_probes_see_randomness_that_escaped():
    sysrand = random.SystemRandom()

    def fn():
        return (random.random() < 0.5, sysrand.random() < 0.5)

    known = {leaf.script: leaf.result for leaf in enumerate_runs(fn, [], 100, [0])}
    assert sum(known.get(s) != out for s, out in probe_runs(fn, [], 0, 40, method="fast")) > 0
    law: dict = defaultdict(float)
    for _, out in probe_runs(lambda: bool(random.random() <= P32[0]), [], 0, 200, method="fast"):
        law[out] += 1 / 200
    assert 0 < law[True] < 0.3  # the probe's answers are drawn, not enumerated


def test_an_unknown_method_is_refused():
    with pytest.raises(ValueError, match="method must be one of"):
        certify_implementation(load_implementation("examples.eagle_style:EagleVerifier"), TREE, method="fork")


def test_the_bench_rows_at_tiny_sizes():
    """``rheo bench gate --exact``'s rows, on tiny cases: their keys, the ratio computed, the
    same law both ways, the ladder's largest case (timing itself is not judged here)."""
    from rheo.bench.exact_impl import run_exact_rows
    from rheo.bench.targets import GATE, judge
    from rheo.cli.bench import _render_exact

    lines: list[str] = []
    rows = run_exact_rows(
        lines.append,
        limit=120.0,
        shapes=((3, 2, 2),),
        handed_shapes=((3, 2, 2),),
        ladder=((3, 2, 2), (3, 2, 3)),
        depth=2,
    )
    [own], [handed] = rows["own_draws"], rows["handed"]
    for row in (own, handed):
        assert {"case", "V", "depth", "K", "R", "replay_runs", "replay_seconds", "fast_runs", "fast_seconds"} <= set(
            row
        )
        assert row["same_law"] and row["verdict"] == "lossless" and row["case"] == "V=3 D=2 K=2 R=2"
        assert row["ratio"] == row["replay_seconds"] / row["fast_seconds"] > 0
        assert 0 < row["fast_runs"] <= row["replay_runs"]
    assert handed["implementation"] == "examples.loop_impl:LoopImplementation"
    assert rows["exact_fast_over_replay"] == own["ratio"] and rows["same_law"]
    big = rows["largest_within_limit"]
    assert [t["case"] for t in big["tried"]] == ["V=3 D=2 K=2 R=2", "V=3 D=2 K=2 R=3"]
    assert big["largest"]["case"] == "V=3 D=2 K=2 R=3" and big["largest"]["seconds"] <= 120
    assert any("the replay path" in line for line in lines)  # progress
    out = {"exact_certification": rows, "exact_fast_over_replay": rows["exact_fast_over_replay"]}
    out["target_verdicts"] = [v.to_json() for v in judge(out, "cpu", GATE)]
    text = "\n".join(_render_exact(out))
    assert "EagleVerifier, V=3 D=2 K=2 R=2" in text and "largest case certified in 120 s" in text


def test_bench_gate_refuses_a_bad_exact_limit(capsys):
    from rheo.cli import main

    assert main(["bench", "gate", "--exact-only", "--exact-limit", "0"]) == 2
    assert "--exact-limit" in capsys.readouterr().err
