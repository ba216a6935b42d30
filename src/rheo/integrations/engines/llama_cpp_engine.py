"""llama-cpp-python's own speculative decoding, end to end, on tiny GGUF models written here
(``llama-cpp-python`` builds llama.cpp from source; ``.ci/engines`` builds it in a venv of
its own with the examples, tests, tools and server off, about 6 minutes on 2 cores).

``Llama(model_path=GGUF, draft_model=LlamaPromptLookupDecoding(num_pred_tokens=L))`` and
its ``generate(tokens, temp=T, top_k=k, top_p=p, min_p=0)``, one request at a time, each
seeded with ``set_seed`` (llama.cpp's ``dist`` sampler takes the seed when ``generate``
builds its sampler chain). llama-cpp-python evaluates the last token with the drafts in one
batch, samples the target at each position with its sampler chain and keeps drafts up to
the first token that differs, removing the rest from the KV cache (``kv_cache_seq_rm``).

Models (``write_gguf``): GGUF files of llama.cpp's ``llama`` architecture, float32, random
weights from numpy with a seed (scale 0.3, query and key x3, RoPE base 10, as
``rheo.testing.engine_models``), a vocabulary with llama.cpp's special and byte tokens
(``<unk>``, ``<s>``, ``</s>``, ``<0x0A>``) and words. Families: ``llama`` (one layer, as many
key/value heads as query heads) and ``gqa`` (two layers, 4 query heads sharing 1 key/value
head).

The reference is llama.cpp's own forward without speculation (a model without a draft,
``logits_all``: one evaluation of prompt + prefix per prefix) through its sampler chain's
law: top-k on the logits, then top-p over the softmax at T = 1 of what is left (llama.cpp
applies the temperature after top-p), then the softmax at T of the kept tokens (``min_p``
0 and ``typical_p`` 1 are off).

Case settings (``EngineCase.extra``): ``prefix_cache`` (always on in llama-cpp-python: a
``generate`` whose prompt shares a prefix with the cached tokens evaluates only the rest;
the counters say how many prompt tokens came from the cache) and ``prefill_chunk`` k
(``n_batch`` and ``n_ubatch`` k: the prompt is evaluated k tokens a batch);
``repetition_penalty``, ``frequency_penalty`` and ``presence_penalty`` are ``generate``'s
``repeat_penalty``, ``frequency_penalty`` and ``presence_penalty``: llama.cpp's penalties
sampler, first in the chain, over the last 64 tokens its chain has sampled in this
``generate`` (the output, not the prompt), which the reference applies to the raw logits
(``base.penalise``) before the chain's law.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from rheo.integrations.engines.base import PENALTIES, EngineCase, Row, penalise, sequence_law

METHODS = ("prompt_lookup",)
FAMILIES = ("llama", "gqa")
EXTRAS = ("prefix_cache", "prefill_chunk") + PENALTIES
PENALTY_WINDOW = 64  # llama-cpp-python's last_n_tokens_size: llama.cpp's penalty_last_n
TARGET_SEED = 0
HEAD_DIM = 16  # llama.cpp takes the head size as hidden / heads: hidden 32 (llama), 64 (gqa)
SPECIAL = ("<unk>", "<s>", "</s>", "<0x0A>")  # llama.cpp's SPM vocabulary wants these (types 2, 3, 3, 6)


def write_gguf(path: str, family: str, vocab: int, seed: int) -> str:
    """A tiny llama-architecture GGUF file (float32) at ``path``."""
    import gguf

    if family not in FAMILIES:
        raise ValueError(f"family: expected one of {', '.join(FAMILIES)}, got {family!r}")
    if not len(SPECIAL) < vocab <= 4096:
        raise ValueError(f"vocab: expected {len(SPECIAL) + 1} to 4096 tokens, got {vocab}")
    heads, kv_heads, layers = (2, 2, 1) if family == "llama" else (4, 1, 2)
    hidden = heads * HEAD_DIM
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(128)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(2 * hidden)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10.0)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_file_type(0)  # all float32
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list([*SPECIAL] + [f"w{i}" for i in range(len(SPECIAL), vocab)])
    w.add_token_scores([0.0] * vocab)
    w.add_token_types([2, 3, 3, 6] + [1] * (vocab - len(SPECIAL)))
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)

    def tensor(name: str, shape: tuple[int, ...], scale: float = 0.3) -> None:
        w.add_tensor(name, (scale * rng.standard_normal(shape)).astype(np.float32))

    tensor("token_embd.weight", (vocab, hidden))
    w.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    tensor("output.weight", (vocab, hidden))
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, np.float32))
        tensor(f"blk.{i}.attn_q.weight", (heads * HEAD_DIM, hidden), 0.9)
        tensor(f"blk.{i}.attn_k.weight", (kv_heads * HEAD_DIM, hidden), 0.9)
        tensor(f"blk.{i}.attn_v.weight", (kv_heads * HEAD_DIM, hidden))
        tensor(f"blk.{i}.attn_output.weight", (hidden, heads * HEAD_DIM))
        tensor(f"blk.{i}.ffn_gate.weight", (2 * hidden, hidden))
        tensor(f"blk.{i}.ffn_up.weight", (2 * hidden, hidden))
        tensor(f"blk.{i}.ffn_down.weight", (hidden, 2 * hidden))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """llama.cpp prints its model loading to file descriptor 2 even with verbose=False."""
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


class LlamaCppEngine:
    """The driver (``rheo.integrations.engines``)."""

    name = "llama_cpp"
    methods = METHODS
    families = FAMILIES
    extras = EXTRAS
    traceable = False  # llama.cpp's sampler draws in C: judged statistically
    batches = False  # one request per generate
    top_p = True  # the reference mirrors llama.cpp's sampler chain (module docstring)
    seeds = True  # set_seed per request
    needs_torch = False
    # llama.cpp keeps its KV cache in float16 (its default, kept): a key cached by an earlier
    # batch and one computed in the same batch round differently. Measured on these models: rows
    # up to 5.3e-4 apart (1.6e-4 with a float32 cache); a position off by one moves them by ~0.1
    row_tolerance = 2e-3

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="rheo-llama-cpp-")
        self._llms: dict[tuple, Any] = {}
        self._laws: dict[tuple, np.ndarray] = {}
        self.stats: dict[str, int] = {}  # over the last generate call: drafts, tokens from drafts, prompt cache

    def close(self) -> None:
        self._llms.clear()
        shutil.rmtree(self.folder, ignore_errors=True)

    def supports(self, case: EngineCase) -> str | None:
        if case.method not in METHODS + ("plain",):
            return f"method: expected one of {', '.join(METHODS)}, got {case.method!r}"
        if case.family not in FAMILIES:
            return f"family: expected one of {', '.join(FAMILIES)}, got {case.family!r}"
        if case.drafter != "model":
            return f"drafter {case.drafter}: llama-cpp-python's built-in drafter is prompt lookup"
        if case.other_prompt:
            return "mixed prompts: llama-cpp-python serves one request at a time"
        if case.vocab <= len(SPECIAL):
            return f"vocab: llama.cpp's vocabulary needs more than {len(SPECIAL)} tokens"
        return None

    def _gguf(self, family: str, vocab: int) -> str:
        path = os.path.join(self.folder, f"{family}-{vocab}-{TARGET_SEED}.gguf")
        if not os.path.exists(path):
            write_gguf(path, family, vocab, TARGET_SEED)
        return path

    def llm(self, case: EngineCase, speculative: bool = True, logits_all: bool = False) -> Any:
        from llama_cpp import Llama
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        chunk = int(case.setting("prefill_chunk") or 64)
        spec = speculative and case.method != "plain"
        key = (case.family, case.vocab, case.draft_len if spec else 0, chunk, logits_all or not spec)
        if key not in self._llms:
            draft = _Counting(LlamaPromptLookupDecoding(max_ngram_size=2, num_pred_tokens=case.draft_len))
            with _quiet_stderr():
                self._llms[key] = Llama(
                    model_path=self._gguf(case.family, case.vocab),
                    n_ctx=128,
                    n_batch=chunk,
                    n_ubatch=chunk,
                    n_threads=1,  # tiny models: llama.cpp's threads cost more than they save
                    n_threads_batch=1,
                    logits_all=logits_all or not spec,  # the reference and the differential check read every row
                    draft_model=draft if spec else None,
                    seed=0,
                    verbose=False,
                )
        return self._llms[key]

    def sampler(self, case: EngineCase) -> dict[str, Any]:
        return {
            "temp": float(case.temperature),
            "top_k": int(case.top_k or 0),  # llama.cpp: top_k <= 0 keeps every token
            "top_p": 1.0 if case.top_p is None else float(case.top_p),
            "min_p": 0.0,
            "typical_p": 1.0,
            "repeat_penalty": float(case.setting("repetition_penalty") or 1.0),
            "frequency_penalty": float(case.setting("frequency_penalty") or 0.0),
            "presence_penalty": float(case.setting("presence_penalty") or 0.0),
        }

    def generate(
        self,
        case: EngineCase,
        seeds: Sequence[int | None],
        per_request_seeds: bool = False,
        logits_all: bool = False,
    ) -> list[tuple[int, ...]]:
        """One request per seed, in order, through one ``Llama`` (its KV cache kept between
        requests, as llama-cpp-python keeps it). ``logits_all``: a ``Llama`` that keeps every
        row's logits (``verified_rows``)."""
        llm = self.llm(case, logits_all=logits_all)
        draft = llm.draft_model
        if draft is not None:
            draft.proposed = 0
        evals, hits, out = [0], 0, []
        evaluate = llm.eval

        def counted(tokens: Sequence[int]) -> None:
            evals[0] += 1
            evaluate(tokens)

        llm.eval = counted
        try:
            for i, seed in enumerate(seeds):
                llm.set_seed(int(seed if seed is not None else i))
                hits += _common_prefix(llm._input_ids[: llm.n_tokens].tolist(), list(case.prompt[:-1]))
                tokens: list[int] = []
                for token in llm.generate(list(case.prompt), **self.sampler(case)):
                    tokens.append(int(token))
                    if len(tokens) == case.n_tokens:
                        break
                out.append(tuple(tokens))
        finally:
            del llm.eval  # the bound method again
        served = sum(len(o) for o in out)
        self.stats = {
            "draft_tokens": draft.proposed if draft is not None else 0,
            "accepted_tokens": max(served - evals[0], 0),  # tokens served beyond one per target evaluation
            "prefix_cache_hits": hits,
            "prefix_cache_queries": len(case.prompt) * len(seeds),
        }
        return out

    def verified_rows(self, case: EngineCase, seeds: Sequence[int]) -> list[Row]:
        """The logits rows the sampler consumed for each request's tokens (a ``Llama`` with
        ``logits_all=True``, which keeps them in ``scores``), beside the rows of one
        evaluation of the accepted sequence without a draft; one request per seed, the KV
        cache kept between them."""
        rows: list[Row] = []
        p = len(case.prompt)
        for r, seed in enumerate(seeds):
            (out,) = self.generate(case, [seed], logits_all=True)
            llm = self.llm(case, logits_all=True)
            engine = np.array(llm.scores[p - 1 : p - 1 + len(out)], dtype=np.float64)
            accepted = list(case.prompt) + list(out)
            plain = self.llm(case, speculative=False)
            plain.reset()
            plain.eval(accepted[:-1])
            teacher = np.array(plain.scores[p - 1 : p - 1 + len(out)], dtype=np.float64)
            for i in range(len(out)):
                rows.append(Row(r, tuple(accepted[: p + i]), engine[i].tolist(), teacher[i].tolist()))
        return rows

    def next_law(self, case: EngineCase, prefix: tuple[int, ...]) -> np.ndarray:
        """llama.cpp's law of the token after prompt + ``prefix`` without speculation."""
        key = (case.family, case.vocab, case.temperature, case.top_k, case.top_p, case.extra, case.prompt + prefix)
        if key not in self._laws:
            llm = self.llm(case, speculative=False)
            llm.reset()
            llm.eval(list(case.prompt + prefix))
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            if any(case.setting(k) for k in PENALTIES):
                window = prefix[-PENALTY_WINDOW:]
                logits = penalise(logits, window, window, *(case.setting(k) for k in PENALTIES))
            self._laws[key] = chain_law(logits, case.temperature, case.top_k, case.top_p)
        return self._laws[key]

    def reference_law(self, case: EngineCase) -> dict[tuple[int, ...], float]:
        return sequence_law(case, self.next_law)


def chain_law(logits: np.ndarray, temperature: float, top_k: int | None, top_p: float | None) -> np.ndarray:
    """The law llama.cpp's sampler chain (top-k, top-p, temperature, dist) samples from
    ``logits``; at T = 0 its greedy sampler's argmax."""
    law = np.zeros(len(logits))
    if temperature == 0:
        law[int(np.argmax(logits))] = 1.0
        return law
    order = np.argsort(-logits, kind="stable")
    kept = order[:top_k] if top_k and top_k > 0 else order
    if top_p is not None and top_p < 1.0:
        p = np.exp(logits[kept] - logits[kept].max())
        cum = np.cumsum(p / p.sum())
        kept = kept[: int(np.searchsorted(cum, top_p)) + 1]  # up to the first cumulative mass >= top_p
    z = logits[kept] / temperature
    q = np.exp(z - z.max())
    law[kept] = q / q.sum()
    return law


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the longest common prefix: the prompt tokens llama-cpp-python's
    ``generate`` takes from the KV cache (it matches the cached ids against the prompt but
    its last token)."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@contextlib.contextmanager
def _kv_not_rolled_back(engine: LlamaCppEngine) -> Iterator[None]:
    """Planted bug: the KV cache keeps the rejected drafts (``kv_cache_seq_rm`` does
    nothing), so later tokens attend to positions no accepted token fills."""
    from llama_cpp import _internals

    saved = _internals.LlamaContext.kv_cache_seq_rm
    _internals.LlamaContext.kv_cache_seq_rm = lambda self, seq_id, p0, p1: None
    engine._llms.clear()  # fresh contexts, before and after
    try:
        yield
    finally:
        _internals.LlamaContext.kv_cache_seq_rm = saved
        engine._llms.clear()


BUGS = {"kv_not_rolled_back": _kv_not_rolled_back}


class _Counting:
    """A draft model that counts the tokens it proposes (llama-cpp-python calls it with the
    input ids and takes the tokens it returns)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.proposed = inner, 0

    def __call__(self, input_ids: Any, /, **kwargs: Any) -> Any:
        tokens = self.inner(input_ids, **kwargs)
        self.proposed += len(tokens)
        return tokens
