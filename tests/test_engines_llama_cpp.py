"""Engines end to end on llama-cpp-python (docs/engines.md): ``Llama(draft_model=
LlamaPromptLookupDecoding(...))`` on tiny GGUF models written here, judged against
llama.cpp without speculation. Run by ``.ci/engines`` in a venv that builds llama-cpp-python
from source; skipped without it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

if importlib.util.find_spec("llama_cpp") is None:
    pytest.skip("llama-cpp-python is not installed (bash .ci/engines builds it)", allow_module_level=True)

from rheo.checks.engines import verdicts as v
from rheo.checks.engines.cases import LONG_PROMPT, LONG_SETTINGS, MIXED_PROMPTS, PENALTY_PROMPT, PENALTY_SETTINGS
from rheo.integrations.engines.base import EngineCase
from rheo.integrations.engines.llama_cpp_engine import LlamaCppEngine, chain_law

A = MIXED_PROMPTS[0]


@pytest.fixture(scope="module")
def engine():
    e = LlamaCppEngine()
    yield e
    e.close()


def test_plain_llama_cpp_samples_the_reference_law(engine) -> None:
    """Without a draft model llama.cpp samples the reference law, top-k and top-p included:
    the reference is its own sampler chain's."""
    for case in (
        EngineCase("plain", "llama", 1.0, n_tokens=3, prompt=A),
        EngineCase("plain", "gqa", 0.7, top_k=3, top_p=0.9, n_tokens=3, prompt=A),
    ):
        r = v.statistical(engine, case, 10_000)
        assert r.verdict == "lossless", r.line()


@pytest.mark.parametrize("family", ["llama", "gqa"])
def test_prompt_lookup_is_lossless(engine, family: str) -> None:
    r = v.statistical(engine, EngineCase("prompt_lookup", family, 1.0, n_tokens=3, prompt=A), 10_000)
    assert r.verdict == "lossless", r.line()
    assert r.data["engine_stats"]["draft_tokens"] > 0 and r.data["engine_stats"]["accepted_tokens"] > 0
    r = v.greedy(engine, EngineCase("prompt_lookup", family, 0.0, n_tokens=4, prompt=A))
    assert r.verdict in ("lossless", "unsupported"), r.line()  # unsupported: no n-gram matched, no draft


def test_penalties_are_lossless(engine) -> None:
    """repeat, frequency and presence penalties: llama.cpp's penalties sampler over the
    tokens its chain sampled (the reference's reading, which plain llama.cpp confirms; the
    penalties move the law by far more than the test detects), with and without drafts."""
    settings = tuple(PENALTY_SETTINGS.items())
    plain = EngineCase("plain", "llama", 1.0, n_tokens=3, prompt=PENALTY_PROMPT, extra=settings)
    moved = engine.reference_law(plain), engine.reference_law(replace(plain, extra=()))
    assert 0.5 * sum(abs(moved[0].get(k, 0) - moved[1].get(k, 0)) for k in set(moved[0]) | set(moved[1])) > 0.1
    for case in (plain, replace(plain, method="prompt_lookup")):
        r = v.statistical(engine, case, 10_000)
        assert r.verdict == "lossless" and r.data["detectable_tv"] < 0.1, r.line()
        r = v.greedy(engine, replace(case, temperature=0.0, n_tokens=4))
        ok = ("lossless",) if case.method == "plain" else ("lossless", "unsupported")  # no n-gram match greedily
        assert r.verdict in ok, r.line()


def test_seeded_requests_are_reproducible(engine) -> None:
    r = v.seeded(engine, EngineCase("prompt_lookup", "llama", 1.0, n_tokens=4, prompt=A))
    assert r.verdict == "reproducible", r.line()


def test_a_prompt_longer_than_n_batch_crashes_speculative_generation(engine) -> None:
    """llama-cpp-python 0.3.16 sizes ``scores`` from the logits_all argument while a draft
    model forces logits at every position (examples/upstream/llama_cpp_draft_model_scores.py)."""
    case = EngineCase("prompt_lookup", "llama", 0.0, n_tokens=4, draft_len=4, prompt=LONG_PROMPT)
    r = v.greedy(engine, EngineCase(**{**case.__dict__, "extra": tuple(LONG_SETTINGS.items())}))
    assert r.verdict == "crashed" and "could not broadcast" in r.detail, r.line()


def test_the_reference_mirrors_llama_cpps_chain() -> None:
    """top-p over the top-k tokens at T = 1, the temperature after: at T = 0.5, top-k 3 and
    top-p 0.75 on logits [2, 1, 0, -1] (T = 1 mass of the top 3: 0.665, 0.245, 0.090) keeps
    two tokens, weighted exp(2 / 0.5) : exp(1 / 0.5)."""
    import numpy as np

    law = chain_law(np.array([2.0, 1.0, 0.0, -1.0]), 0.5, 3, 0.75)
    e = np.exp([4.0, 2.0])
    assert law == pytest.approx([e[0] / e.sum(), e[1] / e.sum(), 0.0, 0.0])


def test_the_upstream_reproducer_shows_the_crash_without_rheo() -> None:
    script = Path(__file__).resolve().parent.parent / "examples" / "upstream" / "llama_cpp_draft_model_scores.py"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "REPRODUCED" in out.stdout, out.stdout + out.stderr


def test_the_planted_kv_cache_bug_is_caught() -> None:
    """The KV cache not rolled back after a rejected draft (llama_cpp_engine.BUGS): the next
    batch's positions overlap the stale ones, which llama.cpp's own batch check refuses
    ("llama_decode returned -1"): the check fails with the crash; without the bug the same
    case is lossless above."""
    from rheo.integrations.engines.llama_cpp_engine import BUGS

    engine = LlamaCppEngine()
    try:
        with BUGS["kv_not_rolled_back"](engine):
            r = v.statistical(engine, EngineCase("prompt_lookup", "llama", 1.0, n_tokens=3, prompt=A), 10_000)
    finally:
        engine.close()
    assert r.failed and r.verdict == "crashed" and "llama_decode returned -1" in r.detail, r.line()


def test_the_rows_the_sampler_consumed_match_a_full_evaluation(engine) -> None:
    """The differential check on llama-cpp-python (``logits_all=True`` keeps the rows): every
    row within the driver's float16-cache tolerance; the planted bug would crash first."""
    r = v.differential(engine, EngineCase("prompt_lookup", "gqa", 1.0, n_tokens=4, prompt=A))
    assert r.verdict == "lossless" and r.data["rows"] == 40, r.line()
    assert r.data["tolerance"] == engine.row_tolerance
