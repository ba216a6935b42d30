"""Engines end to end (docs/engines.md) on transformers: its own ``generate`` with assisted
generation, prompt lookup and universal assisted decoding on tiny real models, judged on the
tokens it returns against the same model without speculation; each planted engine bug
(``rheo.integrations.engines.hf_bugs``) caught by the check named for it."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("transformers")

import torch

from rheo.checks.engines import verdicts as v
from rheo.checks.engines.cases import LOOKUP_PROMPT, PENALTY_PROMPT, SHORT_LONG_PROMPT, engine_cases
from rheo.cli import main
from rheo.integrations.engines import hf_bugs
from rheo.integrations.engines.base import STOPS, EngineCase, penalise, sequence_law
from rheo.integrations.engines.hf import TransformersEngine
from rheo.testing.engine_models import FAMILIES, scripted_drafter, tiny_model

SMALL = {"vocab": 8, "n_tokens": 3, "draft_len": 2, "top_k": 2}


@pytest.fixture(scope="module")
def engine() -> TransformersEngine:
    return TransformersEngine()


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_builds_the_same_weights_twice(family: str) -> None:
    a, b = tiny_model(family, 8, 0), tiny_model(family, 8, 0)
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        la, lb = a(ids).logits, b(ids).logits
    assert torch.equal(la, lb)
    assert not torch.equal(la, tiny_model(family, 8, 1)(ids).logits)


def test_scripted_drafter_puts_all_its_mass_on_the_script() -> None:
    script = [3, 0, 7, 1, 2, 6, 5, 4]
    model = scripted_drafter(8, script)
    with torch.no_grad():
        logits = model(torch.tensor([[5, 2, 0, 6]])).logits[0]
    for row, token in zip(logits, [5, 2, 0, 6]):
        probs = (row / 2.0).softmax(-1)  # the temperature 2 divides the margin: still exactly one-hot
        assert probs[script[token]] == 1.0 and int((probs > 0).sum()) == 1


def test_reference_law_is_the_product_of_sequential_forwards(engine: TransformersEngine) -> None:
    case = EngineCase("assisted", "gqa", 0.7, top_k=3, top_p=0.9, vocab=8, n_tokens=2)
    law = engine.reference_law(case)
    assert abs(sum(law.values()) - 1) < 1e-6
    (first, second), p = max(law.items(), key=lambda kv: kv[1])
    q1, q2 = engine.next_law(case, ()), engine.next_law(case, (first,))
    assert p == pytest.approx(q1[first] * q2[second])
    assert all(int((engine.next_law(case, s[:1]) > 0).sum()) <= 3 for s in law)  # top-k 3 kept


@pytest.mark.parametrize(
    "case",
    [
        EngineCase("assisted", "llama", 1.0, **SMALL),
        EngineCase("assisted", "hybrid", 1.0, **SMALL),
        EngineCase("assisted", "moe", 1.0, **SMALL, drafter="reject"),
        EngineCase("prompt_lookup", "sliding", 1.0, **SMALL, prompt=LOOKUP_PROMPT),
    ],
    ids=lambda c: c.name,
)
def test_unmodified_transformers_is_lossless_exactly(engine: TransformersEngine, case: EngineCase) -> None:
    r = v.exact(engine, case)
    assert r.verdict == "lossless", r.line()
    assert r.data["deviation"] <= v.EXACT_TOLERANCE and r.data["runs"] > 1


def test_reject_drafter_proposes_a_token_never_sampled(engine: TransformersEngine) -> None:
    case = EngineCase("assisted", "moe", 1.0, **SMALL, drafter="reject")
    z = engine.never_sampled(case)
    assert z is not None
    assert all(z not in seq for seq in engine.reference_law(case))


def test_universal_assisted_decoding_is_not_lossless(engine: TransformersEngine) -> None:
    r = v.exact(engine, EngineCase("usd", "llama", 1.0, **SMALL))
    assert r.verdict == "not lossless" and r.data["deviation"] > 0.1, r.line()


def test_a_draft_equal_to_the_target_can_crash_generate(engine: TransformersEngine) -> None:
    """p / q just under 1 and a residual of float32 zeros: a rejection samples from 0 / 0."""
    r = v.exact(engine, EngineCase("assisted", "llama", 1.0, **SMALL, drafter="target"))
    assert r.verdict == "crashed", r.line()
    assert 0 < r.data["raised_probability_on_grid"] < 1e-6
    assert "invalid probability distribution" in r.detail


def test_greedy_equals_the_argmax_sequence(engine: TransformersEngine) -> None:
    r = v.greedy(engine, EngineCase("assisted", "sliding", 0.0, draft_len=3, n_tokens=4))
    assert r.verdict == "lossless", r.line()


def test_differential_rows_agree_without_a_bug(engine: TransformersEngine) -> None:
    r = v.differential(engine, EngineCase("assisted", "hybrid", 1.0, **{**SMALL, "n_tokens": 4}))
    assert r.verdict == "lossless" and r.data["largest_difference"] < 1e-5, r.line()


@pytest.mark.parametrize(
    "bug, family, check",
    [
        ("kv_not_rolled_back", "llama", "differential"),
        ("positions_off_by_one", "gqa", "differential"),
        ("recurrent_state_not_restored", "hybrid", "differential"),
        ("bonus_from_last_draft_row", "llama", "exact"),
    ],
)
def test_each_planted_engine_bug_is_caught(bug: str, family: str, check: str) -> None:
    engine = TransformersEngine()  # a fresh one: a bug may leave models behind
    case = EngineCase("assisted", family, 1.0, **{**SMALL, "n_tokens": 4})
    with hf_bugs.BUGS[bug](engine):
        r = v.differential(engine, case) if check == "differential" else v.exact(engine, replace_n(case, 3))
    assert r.verdict == "not lossless", r.line()
    if check == "differential":
        assert r.data["request"] >= 0 and r.data["position"] >= 1  # named: which request, which token


def replace_n(case: EngineCase, n: int) -> EngineCase:
    return EngineCase(**{**case.__dict__, "n_tokens": n})


def test_statistical_run_confirms_and_states_its_power(engine: TransformersEngine) -> None:
    r = v.statistical(engine, EngineCase("assisted", "llama", 1.0, vocab=8, n_tokens=2), 2000, seed=7)
    assert r.verdict == "lossless", r.line()
    assert 0 < r.data["detectable_tv"] < 0.2 and "detects TV" in r.detail


def test_gate_engine_cli(tmp_path, capsys) -> None:
    args = ["gate", "--engine", "transformers", "--method", "assisted", "--family", "llama", "--profile", "smoke"]
    rc = main([*args, "--json", "--out", str(tmp_path)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["passed"] and out["engine"] == "transformers"
    verdicts = out["checks"][0]["data"]["verdicts"]
    assert {x["check"] for x in verdicts} == {"exact", "differential", "greedy", "logprobs", "statistical"}
    assert all(x["verdict"] == "lossless" for x in verdicts)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--engine", "nope"], "--engine: expected one of"),
        (["--engine", "transformers", "--family", "llama,rnn"], "--family: expected names from"),
        (["--method", "assisted"], "give the engine too"),
        (["--engine", "transformers", "--cycles", "10"], "do not apply"),
    ],
)
def test_gate_engine_bad_input(args: list[str], message: str, capsys) -> None:
    assert main(["gate", *args]) == 2
    assert message in capsys.readouterr().err


def test_rows_name_the_prefix(engine: TransformersEngine) -> None:
    rows = engine.verified_rows(EngineCase("prompt_lookup", "llama", 1.0, **SMALL, prompt=LOOKUP_PROMPT), [0])
    assert rows and all(len(r.prefix) >= len(LOOKUP_PROMPT) for r in rows)
    assert max(float(np.max(np.abs(np.subtract(r.engine, r.teacher)))) for r in rows) < 1e-5


def test_a_long_prompt_prefilled_in_chunks_with_four_drafts_is_lossless(engine: TransformersEngine) -> None:
    case = EngineCase(
        "assisted", "hybrid", 1.0, **{**SMALL, "draft_len": 4}, prompt=SHORT_LONG_PROMPT, extra=(("prefill_chunk", 4),)
    )
    r = v.exact(engine, case)
    assert r.verdict == "lossless", r.line()


@pytest.mark.parametrize("method", ["assisted", "prompt_lookup"])
def test_a_reused_prompt_cache_breaks_speculative_generate(engine: TransformersEngine, method: str) -> None:
    """transformers 5.24's assisted decoding encodes the whole prompt again on top of a
    user's prompt cache (docs/engines.md, examples/upstream/transformers_prompt_cache_assisted.py);
    plain generate with the same cache is right (the reference law is the full forward's)."""
    case = EngineCase(method, "llama", 1.0, **SMALL, prompt=SHORT_LONG_PROMPT, extra=(("prefix_cache", True),))
    r = v.exact(engine, case)
    assert r.verdict == "not lossless" and r.data["deviation"] > 0.1, r.line()


def test_extras_a_driver_does_not_honour_are_refused(engine: TransformersEngine) -> None:
    r = v.exact(engine, EngineCase("assisted", "llama", 1.0, **SMALL, extra=(("warp_speed", 1),)))
    assert r.verdict == "unsupported" and "extra warp_speed" in r.detail
    short = EngineCase("assisted", "llama", 1.0, **SMALL, prompt=(1, 2), extra=(("prefix_cache", True),))
    assert "more than 3 tokens" in v.exact(engine, short).detail


def test_quick_cases_cover_draft_length_four_and_the_long_prompt_settings(engine: TransformersEngine) -> None:
    cases = engine_cases("assisted", "llama", "quick", statistical=False, driver=engine)
    assert [dict(c.extra) for _, c in cases if c.extra] == [
        {"prefix_cache": True},
        {"prefill_chunk": 4},
        {"repetition_penalty": 2.0},  # transformers has no frequency or presence penalty
        {"repetition_penalty": 2.0},
        {"stop_token_ids": cases[-1][1].setting("stop_token_ids")},  # exact, then greedy
        {"stop_token_ids": cases[-1][1].setting("stop_token_ids")},
    ]
    assert any(c.draft_len == 4 for _, c in cases)


def test_penalise_follows_ctrl_then_openai() -> None:
    """[2, -1, 0.5, 1], tokens 0 and 1 repeated, 0 counted twice and 3 once, repetition 2,
    frequency 0.5, presence 0.25: 2 / 2 - 2 * 0.5 - 0.25, -1 * 2, 0.5, 1 - 0.5 - 0.25."""
    out = penalise(np.array([2.0, -1.0, 0.5, 1.0]), [0, 1, 1], [0, 0, 3], 2.0, 0.5, 0.25)
    assert out.tolist() == [-0.25, -2.0, 0.5, 0.25]


def test_two_references_of_the_repetition_penalty_agree() -> None:
    """transformers' own processor (the transformers reference) and ``penalise`` on the raw
    logits (vLLM's reference) give one law; and the penalty moves it."""
    case = EngineCase(
        "assisted", "gqa", 0.7, top_k=5, vocab=16, prompt=PENALTY_PROMPT, extra=(("repetition_penalty", 2.0),)
    )
    own, raw = TransformersEngine(), TransformersEngine(raw_penalties=True)
    for prefix in [(), (4,), (1, 1)]:
        assert own.next_law(case, prefix) == pytest.approx(raw.next_law(case, prefix), abs=1e-6)
    plain = own.next_law(EngineCase("assisted", "gqa", 0.7, top_k=5, vocab=16, prompt=PENALTY_PROMPT), ())
    assert 0.5 * float(np.abs(plain - own.next_law(case, ())).sum()) > 0.05


@pytest.mark.parametrize("method", ["assisted", "prompt_lookup"])
def test_a_repetition_penalty_is_lossless_exactly(engine: TransformersEngine, method: str) -> None:
    (check, case), _ = [
        c for c in engine_cases(method, "llama", "quick", False, engine) if c[1].setting("repetition_penalty")
    ]
    r = v.exact(engine, case)
    assert check == "exact" and r.verdict == "lossless", r.line()


class _Unpenalised(TransformersEngine):
    """transformers generating without the case's penalty: the penalty dropped on its way."""

    def generate(self, case: EngineCase, seeds: list) -> list:
        return super().generate(replace(case, extra=()), seeds)


def test_a_penalty_the_engine_drops_is_caught() -> None:
    small = {**SMALL, "top_k": 3, "prompt": PENALTY_PROMPT}
    r = v.exact(_Unpenalised(), EngineCase("assisted", "llama", 1.0, **small))
    assert r.verdict == "lossless", r.line()  # the same driver without a penalty to drop
    case = EngineCase("assisted", "llama", 1.0, **small, extra=(("repetition_penalty", 2.0),))
    r = v.exact(_Unpenalised(), case)
    assert r.verdict == "not lossless", r.line()


class _Counted:
    """A driver whose counters say what its engine did (as vLLM's do)."""

    name, traceable = "counted", False
    extras = ("prefix_cache",)

    def __init__(self, stats: dict) -> None:
        self.stats = stats

    def supports(self, case: EngineCase) -> None:
        return None

    def reference_law(self, case: EngineCase) -> dict:
        return {(1,): 1.0}

    def generate(self, case: EngineCase, seeds: list, per_request_seeds: bool = False) -> list:
        return [(1,)] * len(seeds)


@pytest.mark.parametrize(
    "stats, extra, verdict",
    [
        ({"draft_tokens": 40, "accepted_tokens": 3}, (), "lossless"),
        ({"draft_tokens": 0, "accepted_tokens": 0}, (), "unsupported"),
        (
            {"draft_tokens": 40, "prefix_cache_hits": 0, "prefix_cache_queries": 70},
            (("prefix_cache", True),),
            "unsupported",
        ),
        (
            {"draft_tokens": 40, "prefix_cache_hits": 64, "prefix_cache_queries": 70},
            (("prefix_cache", True),),
            "lossless",
        ),
    ],
)
def test_a_path_the_engine_did_not_take_is_not_called_lossless(stats: dict, extra: tuple, verdict: str) -> None:
    r = v.greedy(_Counted(stats), EngineCase("ngram", "llama", 0.0, n_tokens=1, extra=extra))
    assert r.verdict == verdict, r.line()
    assert r.data["engine_stats"] == stats and "draft tokens verified" in r.detail


@pytest.mark.parametrize("method", ["assisted", "prompt_lookup"])
def test_scores_and_logits_under_speculation_are_the_rows_without_it(engine: TransformersEngine, method: str) -> None:
    """``output_scores`` (processed) and ``output_logits`` (raw) of assisted generation and
    prompt lookup, every generated token, against the same rows without speculation."""
    r = v.logprobs(engine, EngineCase(method, "gqa", 1.0, **{**SMALL, "n_tokens": 4}, prompt=LOOKUP_PROMPT))
    assert r.verdict == "lossless" and r.data["rows"] == 80, r.line()


class _RowBefore(TransformersEngine):
    """Reports each token's rows one position early (a row index off by one)."""

    def reported(self, case: EngineCase, seeds: list) -> list:
        out = []
        for tokens, kinds in super().reported(case, seeds):
            out.append((tokens, {k: rows[:1] + rows[:-1] for k, rows in kinds.items()}))
        return out


def test_logprobs_of_the_row_before_are_caught() -> None:
    r = v.logprobs(_RowBefore(), EngineCase("assisted", "llama", 1.0, **{**SMALL, "n_tokens": 4}))
    assert r.verdict == "not lossless" and "generated token 1" in r.detail, r.line()


# ---- stop tokens under speculation (docs/engines.md, "Stops") ----


def test_a_stop_token_ends_the_reference_law() -> None:
    case = EngineCase("assisted", "llama", 1.0, vocab=3, n_tokens=3, extra=(("stop_token_ids", (0,)),))
    law = sequence_law(case, lambda c, prefix: np.full(3, 1 / 3))
    assert law[(0,)] == pytest.approx(1 / 3) and law[(1, 0)] == pytest.approx(1 / 9)
    assert not any(0 in seq[:-1] for seq in law)  # nothing after a stop
    assert sum(law.values()) == pytest.approx(1.0) and max(map(len, law)) == 3


@pytest.mark.parametrize("method", ["assisted", "prompt_lookup"])
def test_a_stop_token_under_speculation_is_lossless_exactly(engine: TransformersEngine, method: str) -> None:
    """The stop is the greedy output's second token: greedy generations stop inside a step
    of 4 drafts, sampled ones at every length."""
    cases = engine_cases(method, "llama", "quick", False, engine)
    (_, sampled), (_, greedy) = [c for c in cases if c[1].setting(STOPS)]
    stop = sampled.setting(STOPS)[0]
    r = v.exact(engine, sampled)
    assert r.verdict == "lossless", r.line()
    assert any(len(seq) < sampled.n_tokens for seq in engine.reference_law(sampled))  # some outputs stop early
    g = v.greedy(engine, greedy)
    assert g.verdict == "lossless" and f"{stop}]" in g.detail, g.line()


class _OneAfterStop(TransformersEngine):
    """A driver that serves one token past the stop (a bonus token after an accepted EOS)."""

    def generate(self, case: EngineCase, seeds: list) -> list:
        stops = set(case.setting(STOPS) or ())
        longer = replace(case, extra=(), n_tokens=case.n_tokens + 1)
        out = []
        for tokens in super().generate(longer, seeds):
            cut = next((i for i, t in enumerate(tokens) if t in stops), None)
            out.append(tokens[: cut + 2] if cut is not None and cut + 2 <= len(tokens) else tokens[: case.n_tokens])
        return out


def test_a_token_served_after_a_stop_is_caught() -> None:
    case = EngineCase("assisted", "llama", 1.0, **SMALL, extra=((STOPS, (0,)),))
    r = v.exact(_OneAfterStop(), case)
    assert r.verdict == "not lossless", r.line()
