"""The real-model integration: SmolLM2-135M-Instruct + the committed EAGLE-style head.

Deterministic checks run in the default suite (about a minute on 2 cores): the tree
forward equals plain forwards node by node across cycles (cache rollback included), the
head run incrementally over the tree equals the head recomputed along each path, greedy
speculative decoding equals greedy sampling, and end-of-sequence stops inside an accepted
path. The statistical losslessness checks are ``deep`` (and in ``rheo gate --profile deep``).
Everything skips, with the install command, when the hf extra or the model package is
missing.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from rheo.integrations import hf  # noqa: E402

try:
    hf.require_hf()
    hf.gguf_path()
except hf.MissingModel as e:  # pragma: no cover - depends on the environment
    pytest.skip(str(e), allow_module_level=True)

from rheo.checks.statistics.real_model import PathTableLM, first_tokens_check, later_token_check  # noqa: E402
from rheo.fastpath import FastConfig, run_cycle  # noqa: E402
from rheo.integrations.eagle import load_head  # noqa: E402
from rheo.integrations.spec_lm import SpecLM, autoregressive_generate, speculative_generate  # noqa: E402

PROMPT = "Write a Python function that checks whether a string is a palindrome."
BIG = FastConfig(K=10, depth=8, budget=60, policy="rheo", m=1, draft_top_k=128)


@pytest.fixture(scope="module")
def lm():
    target, tok = hf.load_target(quiet=True)
    head = load_head(target.config)
    return target, tok, head, hf.chat_ids(tok, PROMPT)


class Recorder:
    """Wraps a SpecLM: keeps each cycle's tree, target logits and draft queries/answers."""

    def __init__(self, model):
        self.model, self.log = model, []
        self.vocab_size, self.batch, self.device = model.vocab_size, model.batch, model.device

    def draft_logits(self, query):
        out = self.model.draft_logits(query)
        self.log[-1]["draft"].append((query, out))
        return out

    def target_logits(self, tree):
        out = self.model.target_logits(tree)
        self.log[-1].update(tree=tree, target=out)
        return out

    def advance(self, tree, result):
        self.model.advance(tree, result)

    def cycle(self, cfg, T, gen):
        self.log.append({"committed": list(self.model.tokens), "draft": []})
        return run_cycle(self, cfg, torch.tensor([T], dtype=torch.float64), generator=gen)


def _run(lm, cycles, T=1.0, seed=0):
    target, tok, head, prompt = lm
    rec = Recorder(SpecLM(target, head, prompt))
    gen = torch.Generator().manual_seed(seed)
    lengths = [int(rec.cycle(BIG, T, gen)[1].lengths[0]) for _ in range(cycles)]
    return rec, lengths


def test_tree_forward_equals_plain_forwards_across_cycles(lm):
    """Every tree node's target logits (one masked forward on the rolled-back cache) equal
    a plain causal forward over prompt + committed + path, in every cycle."""
    target, tok, head, prompt = lm
    rec, lengths = _run(lm, 8, T=0.5)
    assert max(lengths) >= 3, f"no cycle accepted 2+ draft tokens ({lengths}): the rollback is not exercised"
    for c in rec.log:
        table = PathTableLM(target, head, prompt, 1)
        committed = tuple(c["committed"][len(prompt) :])
        tree, got = c["tree"], c["target"][0]
        n = int(tree.num_nodes[0])
        paths = [committed + tuple(t for t in tree.prefixes[0, j].tolist() if t >= 0) for j in range(n + 1)]
        table._target_paths(paths)
        want = torch.stack([table._target[p] for p in paths])
        assert torch.allclose(got[: n + 1], want, atol=2e-3, rtol=0), (got[: n + 1] - want).abs().max()


def test_head_over_the_tree_equals_head_along_each_path(lm):
    """The draft head's answers (its own KV cache, tree attention, dropped tree entries)
    equal the head recomputed from scratch along each node's path."""
    target, tok, head, prompt = lm
    rec, lengths = _run(lm, 4, T=0.5, seed=1)
    for c in rec.log:
        table = PathTableLM(target, head, prompt, 1)
        table.committed = [tuple(c["committed"][len(prompt) :])]
        compared = 0
        for query, out in c["draft"]:
            want = table.draft_logits(query)
            valid = query.valid[0]
            # both go through the bf16 lm_head copy: its outputs carry 8 significant bits, so
            # features equal to 1e-5 can land one bf16 step apart (0.0625 at |logit| 8-16);
            # a wrong mask or position moves logits by whole units
            assert torch.allclose(out[0][valid], want[0][valid], atol=2e-2, rtol=2**-6), (
                query.layer,
                (out[0][valid] - want[0][valid]).abs().max(),
            )
            compared += int(valid.sum())
        assert compared >= BIG.depth


@pytest.mark.parametrize("policy,m", [("rheo", 1), ("topk", 0)])
def test_greedy_speculative_equals_greedy_sampling(lm, policy, m):
    """At T = 0 both are deterministic and must agree token for token (up to the first
    near-tie, where float rounding may pick either)."""
    target, tok, head, prompt = lm
    cfg = FastConfig(K=10, depth=8, budget=60, policy=policy, m=m)
    spec = speculative_generate(target, head, prompt, cfg, 0.0, 48)
    plain = autoregressive_generate(target, prompt, 0.0, 48)
    assert spec.tau > 1.5, spec.lengths  # the head does its job at T = 0
    seq = prompt + plain.tokens
    with torch.no_grad():
        logits = target(input_ids=torch.tensor([seq])).logits[0, len(prompt) - 1 : -1]
    top2 = logits.topk(2, -1).values
    margin = (top2[:, 0] - top2[:, 1]).tolist()
    upto = next((i for i, g in enumerate(margin) if g < 1e-3), len(margin))
    assert upto >= 10
    assert spec.tokens[:upto] == plain.tokens[:upto]


def test_stops_at_eos_inside_an_accepted_path(lm):
    """Declare as end-of-sequence a token that greedy decoding emits in the middle of a
    multi-token cycle: generation must stop right after it, dropping the rest of the path."""
    target, tok, head, prompt = lm
    cfg = FastConfig(K=10, depth=8, budget=60, policy="rheo", m=1)
    full = speculative_generate(target, head, prompt, cfg, 0.0, 48)
    start, pick = 0, None
    for n in full.lengths:
        seen = full.tokens[:start]
        for k in range(n - 1):  # not the cycle's last token
            t = full.tokens[start + k] if start + k < len(full.tokens) else None
            if t is not None and t not in seen and t not in full.tokens[start : start + k]:
                pick = (start + k, t)
                break
        if pick:
            break
        start += n
    assert pick, f"no multi-token cycle in {full.lengths}"
    at, eos = pick
    cut = speculative_generate(target, head, prompt, cfg, 0.0, 48, eos={eos})
    assert cut.stopped == "eos" and cut.tokens == full.tokens[: at + 1]


def test_generate_cli_json_and_bad_input():
    out = subprocess.run(
        [sys.executable, "-m", "rheo.cli", "generate", "--max-new-tokens", "6", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    obj = json.loads(out.stdout)
    assert obj["new_tokens"] == len(obj["tokens"]) <= 6 and obj["cycles"] >= 1 and obj["tau"] >= 1
    per = obj["seconds_per_cycle"]  # the split the README's per-cycle costs come from
    assert set(per) == {"target", "draft"} and min(per.values()) > 0
    assert sum(per.values()) * obj["cycles"] <= obj["seconds"] + 1e-3
    bad = subprocess.run(
        [sys.executable, "-m", "rheo.cli", "generate", "--m", "10"], capture_output=True, text=True, timeout=600
    )
    assert bad.returncode == 2 and "--m" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.deep
@pytest.mark.parametrize("policy,m", [("rheo", 1), ("topk", 0)])
def test_first_and_second_token_laws(lm, policy, m):
    target, tok, head, _ = lm
    prompt = hf.chat_ids(tok, "Tell me a short story about a robot.")
    cfg = FastConfig(K=4, depth=3, budget=8, policy=policy, m=m)
    res = first_tokens_check(target, head, prompt, cfg, 2000, alpha=1e-6)
    assert res["passed"], res


@pytest.mark.deep
def test_twelfth_token_against_plain_sampling(lm):
    target, tok, head, _ = lm
    prompt = hf.chat_ids(tok, "Tell me a short story about a robot.")
    res = later_token_check(target, head, prompt, FastConfig(K=4, depth=3, budget=8, m=1), 300, alpha=1e-6)
    assert res["passed"], res


def test_bench_tau_cli_smoke():
    """The benchmark's plumbing on one prompt (the figures come from the README's runs)."""
    out = subprocess.run(
        [sys.executable, "-m", "rheo.cli", "bench", "tau", "--quick", "--prompts", "1", "--new-tokens", "4", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr
    obj = json.loads(out.stdout)
    assert {"tau_topk", "tau_rheo_m1", "ratio_m1_over_topk", "table", "temperature_sweep"} <= set(obj)
    assert obj["tau_topk"] >= 1 and obj["tau_rheo_m1"] >= 1
    assert [r["policy"] for r in obj["table"]] == ["topk", "rheo_m1"]
    assert obj["temperature_sweep"] == []
    bad = subprocess.run(
        [sys.executable, "-m", "rheo.cli", "bench", "tau", "--prompts", "200"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert bad.returncode == 2 and "--prompts" in bad.stderr


@pytest.mark.extended  # 100 s in CI's default run; the command's smoke test above stays there
def test_bench_tau_full_plan_slice_with_the_sweep():
    """The full plan's shape on a one-prompt slice: five policies at T = 1 and the sweep
    T in {0, 0.5, 1} for Top-K, m=0, m=1, each non-Top-K row with its paired ratio."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rheo.cli",
            "bench",
            "tau",
            "--prompts",
            "2",
            "--seeds",
            "1",
            "--sweep-prompts",
            "1",
            "--new-tokens",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr
    obj = json.loads(out.stdout)
    assert [r["policy"] for r in obj["table"]] == ["topk", "rheo_m0", "rheo_m1", "rheo_m2", "rheo_m3"]
    assert obj["sweep_prompts"] == 1 and all(r["prompts"] == 2 for r in obj["table"])
    sweep = {(r["policy"], r["temperature"]): r for r in obj["temperature_sweep"]}
    assert set(sweep) == {(p, T) for p in ("topk", "rheo_m0", "rheo_m1") for T in (0.0, 0.5, 1.0)}
    assert all(r["prompts"] == 1 and r["tau"] >= 1 for r in sweep.values())
    assert all(("ratio_over_topk" in r) == (p != "topk") for (p, _), r in sweep.items())


def test_train_draft_runs_and_saves(tmp_path, monkeypatch):
    """Two steps of the training loop write weights the loader accepts and a record with
    the corpus and the curve. Short sequences and small batches (the loop reads the module's
    SEQ and BATCH): at the real 8 x 256 two steps and three evaluations take over 6 minutes
    on a 2-core CPU, and the loop's code is the same at any size."""
    from rheo.integrations import train_draft
    from rheo.integrations.eagle import HEAD_FILE, head_record

    monkeypatch.setattr(train_draft, "SEQ", 32)
    monkeypatch.setattr(train_draft, "BATCH", 2)
    rec = train_draft.train(steps=2, eval_every=1, eval_chunks=2, out=tmp_path, log=lambda msg: None)
    assert rec["settings"]["seq"] == 32 and rec["curve"][-1]["positions"] == 2 * 31
    assert rec["steps_done"] == 2 and [c["step"] for c in rec["curve"]] == [0, 1, 2]
    assert rec["corpus"]["train"] and rec["corpus"]["held_out"]
    assert not {f for f, _ in rec["corpus"]["train"]} & {f for f, _ in rec["corpus"]["held_out"]}
    target, _ = hf.load_target(quiet=True)
    load_head(target.config, tmp_path / HEAD_FILE)
    assert head_record(tmp_path / HEAD_FILE)["steps_done"] == 2
