"""The upstream reproducers in examples/upstream/ (one per transformers defect in
docs/transformers.md, one per vLLM defect in docs/vllm.md and docs/engines.md): a transformers one imports only
transformers, torch, tokenizers and the standard library, a vLLM one only vllm, torch and
the standard library (it runs in tests/test_vllm_sampling.py, with vLLM); each transformers
one, run in a subprocess with a reduced sample count, reproduces its defect:
the chi-square line is printed and rejects the target's law (or, for the USD logits, rejects
it exactly when the process's ``get_vocab()`` order is not id order, and the measured law is
nearer the law the defect predicts); the crash reproducer shows the AttributeError."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = ROOT / "examples" / "upstream"
SCRIPTS = sorted(p.name for p in UPSTREAM.glob("*.py") if p.name != "__init__.py")
ALLOWED = {"transformers", "torch", "tokenizers"} | set(sys.stdlib_module_names)
ALLOWED_VLLM = {"vllm", "torch"} | set(sys.stdlib_module_names)
ALLOWED_MLX = {"mlx", "mlx_lm", "numpy", "scipy"} | set(sys.stdlib_module_names)
ALLOWED_LLAMA_CPP = {"llama_cpp", "gguf", "numpy"} | set(sys.stdlib_module_names)
ALLOWED_FIELD = {  # docs/field.md's reproducers: the library judged, torch (and Triton for a kernel)
    "field_flashspec_verify_tokens_strides.py": {"flashspec", "torch", "triton"} | set(sys.stdlib_module_names),
    "field_seqspecdecod_capped_hsd.py": {"seqspecdecod", "torch"} | set(sys.stdlib_module_names),
}
CHI = re.compile(r"chi-square against the target law: chi2 = ([\d.]+|inf) on (\d+) df, p = ([\d.e+-]+), N = (\d+)")


def run(name: str, n: int | None = None) -> str:
    pytest.importorskip("transformers")
    env = {**os.environ, "REPRO_SAMPLES": str(n)} if n else dict(os.environ)
    out = subprocess.run([sys.executable, str(UPSTREAM / name)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def law_rows(text: str) -> list[list[float]]:
    rows = [line for line in text.splitlines() if re.match(r"\s+\S+(\s+[\d.]+){2,}$", line)]
    return [[float(x) for x in line.split()[1:]] for line in rows]


def test_there_is_one_reproducer_per_documented_defect_and_each_imports_only_upstream_packages():
    assert SCRIPTS == [
        "field_flashspec_verify_tokens_strides.py",
        "field_seqspecdecod_capped_hsd.py",
        "llama_cpp_draft_model_scores.py",
        "mlx_lm_sliding_window_speculative.py",
        "mlx_lm_speculative_penalty_context.py",
        "transformers_gemma4_greedy_draft.py",
        "transformers_prompt_cache_assisted.py",
        "transformers_usd_prefill_chunk_crash.py",
        "transformers_usd_pruned_logits.py",
        "transformers_usd_subset_vocab_crash.py",
        "vllm_cpu_spec_decode_law.py",
        "vllm_min_tokens_bonus.py",
    ]
    readme = (UPSTREAM / "README.md").read_text(encoding="utf-8")
    for name in SCRIPTS:
        tree = ast.parse((UPSTREAM / name).read_text(encoding="utf-8"))
        roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        roots |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        allowed = ALLOWED_FIELD.get(name) or (ALLOWED_VLLM if name.startswith("vllm_") else ALLOWED)
        allowed = ALLOWED_MLX if name.startswith("mlx_") else allowed
        allowed = ALLOWED_LLAMA_CPP if name.startswith("llama_cpp_") else allowed
        assert roots <= allowed, (name, roots - allowed)
        assert name in readme, name


def test_the_gemma4_reproducer_rejects_the_target_law():
    text = run("transformers_gemma4_greedy_draft.py", 30)
    stat, df, p, n = CHI.search(text).groups()
    assert (int(df), int(n)) == (7, 30) and float(p) < 1e-10, text
    rows = law_rows(text)
    assert len(rows) == 8 and rows[0][0] == 1.0 and all(r[1] == pytest.approx(0.125, abs=1e-4) for r in rows), text


def test_the_usd_logits_reproducer_rejects_the_target_law_iff_get_vocab_was_not_in_id_order():
    text = run("transformers_usd_pruned_logits.py", 300)
    stat, df, p, n = CHI.search(text).groups()
    assert (int(df), int(n)) == (3, 300), text
    rows = law_rows(text)  # measured, target, predicted by the defect
    assert len(rows) == 5 and [r[1] for r in rows] == [0.0, 0.1, 0.2, 0.3, 0.4], text
    far = sum(abs(r[0] - r[1]) for r in rows) / 2
    near = sum(abs(r[0] - r[2]) for r in rows) / 2
    if "NOT id order" in text:
        assert float(p) < 1e-3 and near < far, text
    else:
        assert "id order: no misplacement expected" in text and float(p) > 1e-6, text


def test_the_prompt_cache_reproducer_rejects_the_target_law_with_prompt_lookup_only():
    text = run("transformers_prompt_cache_assisted.py", 600)
    (lookup, plain) = [m.groups() for m in CHI.finditer(text)]
    assert float(lookup[2]) < 1e-10 and float(plain[2]) > 1e-4, text
    assert "received 17 tokens on a cache of 12" in text and "received 3 tokens on a cache of 12" in text, text


def test_the_prefill_chunk_reproducer_shows_the_crash():
    text = run("transformers_usd_prefill_chunk_crash.py")
    assert "with prefill_chunk_size=2: CRASH: RuntimeError: The size of tensor a" in text, text
    assert "without it: [" in text and "(runs)" in text, text


def test_the_subset_vocabulary_reproducer_shows_the_crash():
    text = run("transformers_usd_subset_vocab_crash.py")
    assert "CRASH: AttributeError" in text and "assistant_overlap_token_ids" in text, text
    assert re.search(r"raised at candidate_generator\.py:\d+ in get_target_ids", text), text
