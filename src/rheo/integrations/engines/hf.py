"""transformers' own speculative generation, end to end, on tiny real models
(``rheo.testing.engine_models``): ``model.generate(...)`` called as a user calls it, its
tokens collected. Nothing of transformers is copied or changed here.

Methods (``METHODS``):

- ``assisted``: ``generate(assistant_model=drafter, num_assistant_tokens=L,
  num_assistant_tokens_schedule="constant")``, transformers' default confidence threshold
  left on; verified by rejection sampling (``_speculative_sampling``) at T > 0;
- ``prompt_lookup``: ``generate(prompt_lookup_num_tokens=L)``: drafts copied from n-grams of
  the prompt, no draft law; every position sampled from the target, drafts kept up to the
  first mismatch;
- ``usd``: universal assisted decoding: an assistant with its own tokenizer
  (``generate(assistant_model=..., tokenizer=..., assistant_tokenizer=...)``), the
  assistant's vocabulary the target's words in reverse order plus one of its own.

Case settings (``EngineCase.extra``, ``EXTRAS``): ``prefill_chunk`` k prefills the prompt k
tokens a forward (``generate(prefill_chunk_size=k)``); ``prefix_cache`` hands ``generate`` a
cache of the prompt but its last ``PROMPT_TAIL`` tokens, filled by an earlier forward of the
target (``past_key_values=``, a fresh copy per request: a user's reused prompt cache);
``repetition_penalty`` r is ``generate(repetition_penalty=r)`` (CTRL's penalty on every token
of the prompt and the output so far).

The reference (``reference_law``) is the target alone: one full forward (no cache) per
prefix, through the logits processors ``generate`` builds for the same sampler settings
(repetition penalty, temperature, top-k, top-p; T = 0 the argmax of the processed logits),
the product over the n tokens.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
import transformers

from rheo.integrations.engines.base import (
    DRAFTERS,
    PENALTIES,
    STOPS,
    EngineCase,
    Row,
    penalise,
    sequence_law,
    stops_of,
)
from rheo.integrations.transformers_assisted.generators import WordTokenizer, one_thread
from rheo.testing.engine_models import FAMILIES, scripted_drafter, tiny_model, word_tokenizer, words

METHODS = ("assisted", "prompt_lookup", "usd")
# the EngineCase.extra settings this driver honours: transformers has no frequency or presence penalty
EXTRAS = ("prefix_cache", "prefill_chunk", "repetition_penalty", STOPS)
PROMPT_TAIL = 3  # prefix_cache: the prompt's last tokens that generate still has to encode
TARGET_SEED, DRAFT_SEED = 0, 1


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """transformers' per-call warnings off for the call, and ``one_thread`` (torch on one
    thread: the models are tiny); restored."""
    level = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with one_thread():
            yield
    finally:
        transformers.logging.set_verbosity(level)


class TransformersEngine:
    """The driver (``rheo.integrations.engines``): models built once per case key and
    kept; ``generate`` draws from torch's global generator, reseeded per request when a
    seed is given."""

    name = "transformers"
    extras = EXTRAS
    methods = METHODS
    families = FAMILIES
    traceable = True  # its draws (torch.multinomial, torch.rand_like) are followed exactly
    trace_roots = ("transformers",)

    def __init__(self, head_dim: int | None = None, hidden: int = 16, raw_penalties: bool = False) -> None:
        self.head_dim = head_dim  # the models' attention head size (None: hidden / heads)
        self.hidden = hidden  # the models' hidden size
        # the reference of another engine (vLLM): the case's penalties (base.PENALTIES) applied
        # to the raw logits first (``penalise``: the prompt and output repeated, the output
        # counted), the processors then without transformers' own repetition penalty
        self.raw_penalties = raw_penalties
        self._models: dict[tuple, Any] = {}
        self._laws: dict[tuple, np.ndarray] = {}
        # a planted bug's subclass of the target's class (rheo.integrations.engines.hf_bugs), or None
        self.target_patch: Callable[[type], type] | None = None

    # ---- models ----

    def _model(self, family: str, vocab: int, seed: int) -> Any:
        return tiny_model(family, vocab, seed, hidden=self.hidden, head_dim=self.head_dim)

    def supports(self, case: EngineCase) -> str | None:
        """Why ``case`` cannot run here (None: it can)."""
        if case.method not in METHODS:
            return f"method: expected one of {', '.join(METHODS)}, got {case.method!r}"
        if case.family not in FAMILIES:
            return f"family: expected one of {', '.join(FAMILIES)}, got {case.family!r}"
        if case.drafter not in DRAFTERS:
            return f"drafter: expected one of {', '.join(DRAFTERS)}, got {case.drafter!r}"
        if case.method == "usd" and case.temperature == 0:
            return "usd at T = 0 is transformers' greedy different-tokenizer path, not universal assisted decoding"
        if case.method != "assisted" and case.drafter != "model":
            return f"drafter {case.drafter}: only assisted generation takes a drafter model"
        if case.setting("prefix_cache") and len(case.prompt) <= PROMPT_TAIL:
            return f"prefix_cache: the prompt needs more than {PROMPT_TAIL} tokens"
        if case.drafter == "reject" and self.never_sampled(case) is None:
            return "drafter reject: every token has positive probability after some reachable prefix (lower top_k)"
        return None

    def target(self, case: EngineCase, patched: bool = True) -> Any:
        """The target model ``generate`` runs on (``patched``: with ``target_patch``); the
        reference and the teacher-forced forwards use the unpatched one."""
        patch = self.target_patch if patched else None
        key = ("target", case.family, case.vocab, patch)
        if key not in self._models:
            model = self._model(case.family, case.vocab, TARGET_SEED)
            if patch is not None:
                model.__class__ = patch(type(model))
            self._models[key] = model
        return self._models[key]

    def drafter(self, case: EngineCase) -> Any:
        if case.method == "usd":
            key: tuple = ("usd", case.family, case.vocab)
            if key not in self._models:
                self._models[key] = self._model(case.family, case.vocab + 1, DRAFT_SEED)  # the target's words + 1
            return self._models[key]
        if case.drafter == "reject":
            z = self.never_sampled(case)
            key = ("scripted", case.vocab, z)
            if key not in self._models:
                self._models[key] = scripted_drafter(case.vocab, [int(z or 0)] * case.vocab)
            return self._models[key]
        seed = TARGET_SEED if case.drafter == "target" else DRAFT_SEED
        key = ("draft", case.family, case.vocab, seed)
        if key not in self._models:
            self._models[key] = self._model(case.family, case.vocab, seed)
        return self._models[key]

    def tokenizers(self, case: EngineCase) -> tuple[Any, Any]:
        key = ("tokenizers", case.family, case.vocab)  # transformers caches its translator per tokenizer pair
        if key not in self._models:
            target_words = words(case.vocab)
            assistant_words = target_words[::-1] + ["extra"]
            self._models[key] = tuple(
                WordTokenizer(tokenizer_object=word_tokenizer(w)) for w in (target_words, assistant_words)
            )
        return self._models[key]

    # ---- generation ----

    def sampling(self, case: EngineCase) -> dict[str, Any]:
        penalty = None if self.raw_penalties else case.setting("repetition_penalty")
        kw: dict[str, Any] = {} if penalty is None else {"repetition_penalty": float(penalty)}
        if case.temperature == 0:
            return {"do_sample": False, **kw}
        return {
            "do_sample": True,
            "temperature": float(case.temperature),
            "top_k": 0 if case.top_k is None else int(case.top_k),
            "top_p": 1.0 if case.top_p is None else float(case.top_p),
            **kw,
        }

    def generate_kwargs(self, case: EngineCase) -> dict[str, Any]:
        kw: dict[str, Any] = {**self.sampling(case), "max_new_tokens": case.n_tokens}
        if case.method == "assisted":
            kw |= {
                "assistant_model": self.drafter(case),
                "num_assistant_tokens": case.draft_len,
                "num_assistant_tokens_schedule": "constant",
            }
        elif case.method == "prompt_lookup":
            kw["prompt_lookup_num_tokens"] = case.draft_len
        else:
            tok, assistant_tok = self.tokenizers(case)
            kw |= {"assistant_model": self.drafter(case), "tokenizer": tok, "assistant_tokenizer": assistant_tok}
            kw |= {"num_assistant_tokens": case.draft_len, "num_assistant_tokens_schedule": "constant"}
        if case.setting("prefill_chunk"):
            kw["prefill_chunk_size"] = int(case.setting("prefill_chunk"))
        if stops_of(case):  # generate's end-of-sequence ids (the models have none of their own)
            kw["eos_token_id"] = sorted(stops_of(case))
        return kw

    def prompt_cache(self, case: EngineCase) -> Any:
        """The target's cache over the prompt but its last ``PROMPT_TAIL`` tokens, from one
        forward of the model ``generate`` runs (built once; ``generate`` gets copies)."""
        model = self.target(case)
        key = ("prompt_cache", case.family, case.vocab, case.prompt, self.target_patch)
        if key not in self._models:
            cache = transformers.DynamicCache(config=model.config)
            with quiet(), torch.no_grad():
                model(torch.tensor([list(case.prompt[:-PROMPT_TAIL])]), cache=cache, use_cache=True)
            self._models[key] = cache
        return self._models[key]

    def _calls(self, case: EngineCase, seeds: Sequence[int | None], **extra: Any) -> Iterator[Any]:
        """``model.generate`` once per seed (reseeding torch's generator; None: as it stands),
        a fresh copy of the prompt cache each time where the case has one; ``extra`` goes to
        every call."""
        model, kw = self.target(case), {**self.generate_kwargs(case), **extra}
        prompt = torch.tensor([list(case.prompt)], dtype=torch.long)
        cache = self.prompt_cache(case) if case.setting("prefix_cache") else None
        with quiet(), torch.no_grad():
            for seed in seeds:
                if seed is not None:
                    torch.manual_seed(seed)
                if cache is not None:
                    kw["cache"] = copy.deepcopy(cache)
                yield model.generate(prompt, attention_mask=torch.ones_like(prompt), **kw)

    def generate(self, case: EngineCase, seeds: Sequence[int | None]) -> list[tuple[int, ...]]:
        """One request per seed (transformers' assisted generation takes one request at a
        time); a seed of None draws on from torch's generator as it stands (the exact check)."""
        return [tuple(int(t) for t in ids[0, len(case.prompt) :].tolist()) for ids in self._calls(case, seeds)]

    # ---- the reference: the target alone, sequential full forwards ----

    def processors(self, case: EngineCase) -> Any:
        sampling = tuple(sorted(self.sampling(case).items()))
        key = ("processors", case.family, case.vocab, sampling, len(case.prompt))
        if key not in self._models:
            model: Any = self.target(case, patched=False)
            config, _ = model._prepare_generation_config(None, **dict(sampling))
            model._prepare_special_tokens(config, False, device="cpu", batch_size=1)
            self._models[key] = model._get_logits_processor(
                generation_config=config,
                input_ids_seq_length=len(case.prompt),
                encoder_input_ids=torch.tensor([list(case.prompt)]),
                device="cpu",
                model_kwargs={},
            )
        return self._models[key]

    def logits(self, case: EngineCase, tokens: Sequence[int]) -> torch.Tensor:
        """The target's raw logits [len(tokens), V] from one full forward, no cache."""
        with quiet(), torch.no_grad():
            ids = torch.tensor([list(tokens)], dtype=torch.long)
            return self.target(case, patched=False)(ids, use_cache=False).logits[0].float()

    def next_law(self, case: EngineCase, prefix: tuple[int, ...]) -> np.ndarray:
        """The law ``generate`` samples the token after prompt + ``prefix`` from without
        speculation (float32 as transformers computes it, returned as float64)."""
        key = (case.family, case.vocab, tuple(sorted(self.sampling(case).items())), case.extra, case.prompt + prefix)
        if key not in self._laws:
            ids = list(case.prompt + prefix)
            scores = self.logits(case, ids)[-1:]
            if self.raw_penalties and any(case.setting(k) for k in PENALTIES):
                rep, freq, pres = (case.setting(k) for k in PENALTIES)
                scores = torch.tensor(
                    penalise(scores[0].numpy(), ids, prefix, rep, freq, pres)[None], dtype=torch.float32
                )
            with quiet():
                scores = self.processors(case)(torch.tensor([ids]), scores)
            if case.temperature == 0:
                law = np.zeros(case.vocab)
                law[int(torch.argmax(scores[0]))] = 1.0
            else:
                law = scores.softmax(dim=-1)[0].double().numpy()
            self._laws[key] = law
        return self._laws[key]

    def reference_law(self, case: EngineCase) -> dict[tuple[int, ...], float]:
        return sequence_law(case, self.next_law)

    def never_sampled(self, case: EngineCase) -> int | None:
        """The lowest token of probability 0 after every prefix a generation can reach (the
        scripted drafter's proposal for ``drafter="reject"``), or None."""
        seen = np.zeros(case.vocab, dtype=bool)
        law: dict[tuple[int, ...], float] = {(): 1.0}
        for _ in range(case.n_tokens):
            nxt: dict[tuple[int, ...], float] = {}
            for prefix in law:
                q = self.next_law(case, prefix)
                seen |= q > 0
                nxt |= {prefix + (int(t),): 1.0 for t in np.flatnonzero(q > 0)}
            law = nxt
        free = np.flatnonzero(~seen)
        return int(free[0]) if len(free) else None

    # ---- reported values: scores and logits ----

    def reported(self, case: EngineCase, seeds: Sequence[int]) -> list[tuple[tuple[int, ...], dict[str, list]]]:
        """Per request (one per seed): its tokens and, per kind, the log-probability rows
        ``generate`` reports for them: "processed" the log softmax of ``output_scores`` (the
        logits after the processors: the law sampled), "raw" of ``output_logits``."""
        out = []
        flags = {"output_scores": True, "output_logits": True, "return_dict_in_generate": True}
        for res in self._calls(case, seeds, **flags):
            tokens = tuple(int(t) for t in res.sequences[0, len(case.prompt) :].tolist())
            rows = {
                "processed": [torch.log_softmax(r[0].double(), -1).numpy() for r in res.scores],
                "raw": [torch.log_softmax(r[0].double(), -1).numpy() for r in res.logits],
            }
            out.append((tokens, rows))
        return out

    def reported_reference(self, case: EngineCase, kind: str, prefix: tuple[int, ...]) -> np.ndarray:
        """The row ``reported`` should give after prompt + ``prefix``, without speculation:
        log of the law sampled ("processed"), log softmax of the target's logits ("raw")."""
        if kind == "processed":
            with np.errstate(divide="ignore"):
                return np.log(self.next_law(case, prefix))
        logits = self.logits(case, list(case.prompt + prefix))[-1].double()
        return torch.log_softmax(logits, -1).numpy()

    # ---- the differential forward check ----

    def verified_rows(self, case: EngineCase, seeds: Sequence[int]) -> list[Row]:
        """Every logits row the verifier consumed while generating (the prompt's last, and
        each verification forward's), beside the row a full forward of the accepted prefix
        gives; one generation per seed."""
        model = self.target(case)
        rows: list[Row] = []
        for r, seed in enumerate(seeds):
            calls: list[tuple[int, list[int], torch.Tensor]] = []
            with _recording(model, calls):
                (out,) = self.generate(case, [seed])
            accepted = list(case.prompt) + list(out)
            for past, ids, logits in calls:
                m = logits.shape[0]
                if past > len(accepted):
                    for i in range(m):
                        why = (
                            f"the cache held {past} positions before this forward; {len(accepted)} tokens were accepted"
                        )
                        rows.append(Row(r, tuple(accepted), logits[i].tolist(), None, why))
                    continue
                seq = accepted[:past] + ids
                teacher = self.logits(case, seq)[len(seq) - m :]
                for i in range(m):
                    end = len(seq) - m + i + 1
                    if end >= len(case.prompt):  # the prompt's own rows are computed, never consumed
                        rows.append(Row(r, tuple(seq[:end]), logits[i].tolist(), teacher[i].tolist()))
        return rows


@contextlib.contextmanager
def _recording(model: Any, calls: list) -> Iterator[None]:
    """While active, each forward of ``model`` appends (cache length before the call, the
    input ids, its logits rows)."""
    forward = model.forward

    def recorded(*args: Any, **kwargs: Any) -> Any:
        cache = kwargs.get("cache", kwargs.get("past_key_values"))  # transformers 5 names it "cache"
        past = int(cache.get_seq_length()) if cache is not None else 0
        ids: Any = kwargs.get("input_ids", args[0] if args else None)
        out = forward(*args, **kwargs)
        calls.append((past, [int(t) for t in ids[0].tolist()], out.logits[0].detach().float().clone()))
        return out

    model.forward = recorded
    try:
        yield
    finally:
        del model.forward
