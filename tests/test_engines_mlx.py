"""Engines end to end on mlx-lm (docs/engines.md): ``speculative_generate_step`` on tiny
mlx Llamas, judged against the same model without speculation. Run by ``.ci/engines`` in a
venv of its own (mlx[cpu], mlx-lm, no torch); skipped without mlx-lm."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mlx_lm")

from rheo.checks.engines import verdicts as v
from rheo.integrations.engines.base import EngineCase
from rheo.integrations.engines.mlx_engine import MlxEngine


@pytest.fixture(scope="module")
def engine() -> MlxEngine:
    return MlxEngine()


@pytest.mark.parametrize("family", ["llama", "gqa"])
def test_speculative_generation_is_lossless(engine: MlxEngine, family: str) -> None:
    case = EngineCase("speculative", family, 1.0, n_tokens=3, draft_len=2, prompt=(1, 2, 3, 1, 2))
    r = v.statistical(engine, case, 4000)
    assert r.verdict == "lossless", r.line()
    assert v.greedy(engine, EngineCase("speculative", family, 0.0, n_tokens=4)).verdict == "lossless"


def test_top_k_is_lossless(engine: MlxEngine) -> None:
    r = v.statistical(engine, EngineCase("speculative", "llama", 0.7, top_k=3, n_tokens=3), 4000)
    assert r.verdict == "lossless", r.line()


def test_a_sliding_window_layer_is_not_lossless_even_greedily(engine: MlxEngine) -> None:
    """mlx-lm 0.32.2 (docs/engines.md, "Findings")."""
    r = v.greedy(engine, EngineCase("speculative", "sliding", 0.0, n_tokens=4))
    assert r.verdict == "not lossless", r.line()
    r = v.statistical(engine, EngineCase("speculative", "sliding", 1.0, n_tokens=3, prompt=(1, 2, 3, 1, 2)), 2000)
    assert r.verdict == "not lossless", r.line()


def test_the_upstream_reproducer_shows_it_without_rheo() -> None:
    script = Path(__file__).resolve().parent.parent / "examples" / "upstream" / "mlx_lm_sliding_window_speculative.py"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "DIFFERENT" in out.stdout, out.stdout + out.stderr
    out = subprocess.run([sys.executable, str(script), "--full"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "the same" in out.stdout, out.stdout + out.stderr


def test_a_long_prompt_from_a_prompt_cache_prefilled_in_chunks_is_lossless(engine: MlxEngine) -> None:
    """70 prompt tokens, the first 67 from a prompt cache (``prompt_cache=``), the rest
    prefilled 16 a step, 4 drafts a step; the sliding family refuses the prompt cache."""
    from rheo.checks.engines.cases import LONG_PROMPT, LONG_SETTINGS

    extra = tuple(LONG_SETTINGS.items())
    case = EngineCase("speculative", "llama", 1.0, n_tokens=3, draft_len=4, prompt=LONG_PROMPT, extra=extra)
    r = v.statistical(engine, case, 4000)
    assert r.verdict == "lossless", r.line()
    assert v.greedy(engine, EngineCase(**{**case.__dict__, "temperature": 0.0})).verdict == "lossless"
    sliding = EngineCase(**{**case.__dict__, "family": "sliding"})
    assert "rotating prompt cache" in (engine.supports(sliding) or "")


def test_a_repetition_penalty_is_not_lossless_even_greedily(engine: MlxEngine) -> None:
    """mlx-lm 0.32.2: ``speculative_generate_step`` shows its logits processors the prompt's
    last token and what was sampled since, not the prompt (docs/engines.md, "Findings").
    ``generate_step`` without a draft samples the reference law (the penalty over the
    prompt and the output, the last 20 tokens)."""
    from dataclasses import replace

    from rheo.checks.engines.cases import PENALTY_PROMPT

    case = EngineCase("plain", "llama", 1.0, n_tokens=3, prompt=PENALTY_PROMPT, extra=(("repetition_penalty", 2.0),))
    r = v.statistical(engine, case, 4000)
    assert r.verdict == "lossless", r.line()
    assert v.greedy(engine, replace(case, temperature=0.0, n_tokens=4)).verdict == "lossless"
    r = v.statistical(engine, replace(case, method="speculative"), 4000)
    assert r.verdict == "not lossless", r.line()
    r = v.greedy(engine, replace(case, method="speculative", temperature=0.0, n_tokens=4))
    assert r.verdict == "not lossless", r.line()


def test_the_penalty_reproducer_shows_it_without_rheo() -> None:
    script = Path(__file__).resolve().parent.parent / "examples" / "upstream" / "mlx_lm_speculative_penalty_context.py"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "DIFFERENT" in out.stdout, out.stdout + out.stderr
