"""One draft-verify cycle of transformers' real ``model.generate(do_sample=True)`` per
candidate generator (``GenerateCycle`` and one adapter class per generator the release
ships), with transformers' own logits processors as ``sampler_law``.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import transformers
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoTokenizer, PreTrainedModel
from transformers.generation.candidate_generator import AssistantVocabTranslatorCache
from transformers.generation.stopping_criteria import StoppingCriteria, StoppingCriteriaList

from rheo.integrations.transformers_assisted.models import (
    CODE_LIMIT,
    DTYPE,
    Gemma4AssistantTableForCausalLM,
    Gemma4TableForCausalLM,
    Logits,
    State,
    TableConfig,
    TableDFlashAssistant,
    TableLinearHeadLM,
    TableLM,
    Tables,
)
from rheo.reference.sampling import PARAMETERS


class StopAfter(StoppingCriteria):
    """Stops ``generate`` at its ``n``-th check: ``_assisted_decoding`` checks once per
    iteration, after the verification and the update of ``input_ids``."""

    def __init__(self, n: int):
        self.n, self.calls = n, 0

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        self.calls += 1
        return torch.full((input_ids.shape[0],), self.calls >= self.n, dtype=torch.bool)  # type: ignore[return-value]


@contextmanager
def one_thread() -> Iterator[None]:
    """torch on one thread for the cycle (its tensors are tiny, and on a shared machine
    waking a second thread costs milliseconds per operation), and transformers' progress
    bars off (``MtpModel.from_pretrained`` shows one per ``generate``); both restored."""
    n, bars = torch.get_num_threads(), transformers.utils.logging.is_progress_bar_enabled()
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    try:
        yield
    finally:
        torch.set_num_threads(n)
        if bars:
            transformers.utils.logging.enable_progress_bar()


def is_chain(config: dict) -> bool:
    return config["K"] == 1 and config["policy"] == "rheo" and config["m"] == 0


def chain_length(config: dict) -> int:
    """L = min(depth, budget): the number of draft tokens of the cycle."""
    return int(min(config["depth"], config["budget"]))


# the sampling parameters (docs/spec.md §9) ``generate`` takes from its own arguments (``sampling_kwargs``)
GENERATE_PARAMETERS = frozenset(
    {"repetition_penalty", "no_repeat_ngram_size", "bad_words", "min_tokens", "sequence_bias"}
)


def parameters_set(config: dict) -> list[str]:
    """The sampling parameters (docs/spec.md §9) the config sets (absent or None = off)."""
    return [name for name in PARAMETERS if config.get(name) is not None]


def context_of(config: dict) -> tuple[int, ...]:
    """prompt + generated: the tokens before the cycle's first position (before the
    generation's first token for whole generations), () when the case has no sampling
    parameters (the config then has neither key)."""
    return tuple(int(t) for t in config.get("prompt") or ()) + tuple(int(t) for t in config.get("generated") or ())


def sampling_refusal(config: dict, accepted) -> str | None:
    """Why ``generate`` cannot apply the config's sampling parameters as docs/spec.md §9
    defines them (None when it can, or when none is set). ``accepted``: the parameters the
    adapter passes on.

    - a parameter outside ``accepted`` (frequency_penalty, presence_penalty, logit_bias and
      allowed_token_ids have no ``generate`` argument of that meaning; the adapters whose
      root is not prompt + generated take none);
    - ``bad_words_scope`` other than "prompt_and_generated" (``NoBadWordsLogitsProcessor``
      matches against ``input_ids``, the whole history);
    - ``repetition_penalty_form`` other than "sign" (``RepetitionPenaltyLogitsProcessor``:
      ``score < 0 ? score * r : score / r``);
    - a one-token bad word that is an end-of-sequence id, with min_tokens (transformers drops
      such a word from ``bad_words_ids`` when ``eos_token_id`` is set: it would ban end of
      sequence only while min_new_tokens holds, docs/spec.md bans it always).

    >>> sampling_refusal({"repetition_penalty": 2.0, "repetition_penalty_form": "divide"}, GENERATE_PARAMETERS)
    'repetition_penalty_form "divide": transformers implements "sign" only'
    """
    names = parameters_set(config)
    other = [name for name in names if name not in accepted]
    if other:
        return f"{', '.join(other)}: not passed to generate by this adapter"
    if "bad_words" in names and config.get("bad_words_scope", "prompt_and_generated") != "prompt_and_generated":
        return f'bad_words_scope "{config["bad_words_scope"]}": transformers matches bad words against input_ids'
    if "repetition_penalty" in names and config.get("repetition_penalty_form", "sign") != "sign":
        return f'repetition_penalty_form "{config["repetition_penalty_form"]}": transformers implements "sign" only'
    if "bad_words" in names and "min_tokens" in names:
        eos = set(_eos_ids(config))
        if any(len(word) == 1 and int(word[0]) in eos for word in config["bad_words"]):
            return "a one-token bad word that is an eos_token_id: transformers drops it from bad_words_ids"
    return None


def _eos_ids(config: dict) -> list[int]:
    eos = config.get("eos_token_id")
    if eos is None:
        return []
    return [int(eos)] if isinstance(eos, (int, np.integer)) else [int(e) for e in eos]


def sampling_kwargs(config: dict, new: int | None = None) -> dict[str, Any]:
    """The config's sampling parameters (docs/spec.md §9) as ``generate`` arguments, for
    ``input_ids`` = [anchor] + prompt + generated: ``repetition_penalty``,
    ``no_repeat_ngram_size``, ``bad_words_ids``, ``sequence_bias`` ({tuple: float}), and
    min_tokens as ``min_new_tokens`` = max(0, min_tokens - len(generated)) (the request's
    own tokens before the cycle count) with ``eos_token_id``. ``new``: the most new tokens
    the call emits; min_new_tokens is capped at it (what it masks inside the call is the
    same, and ``generate`` warns about a minimum beyond its maximum length).

    >>> sampling_kwargs({"min_tokens": 3, "eos_token_id": [1], "generated": [0], "prompt": [2]}, 5)
    {'eos_token_id': [1], 'min_new_tokens': 2}
    """
    out: dict[str, Any] = {}
    if config.get("repetition_penalty") is not None:
        out["repetition_penalty"] = float(config["repetition_penalty"])
    if config.get("no_repeat_ngram_size") is not None:
        out["no_repeat_ngram_size"] = int(config["no_repeat_ngram_size"])
    if config.get("bad_words"):
        out["bad_words_ids"] = [[int(t) for t in word] for word in config["bad_words"]]
    if config.get("sequence_bias"):
        out["sequence_bias"] = {_ids(seq): float(b) for seq, b in config["sequence_bias"].items()}
    if config.get("min_tokens") is not None:
        out["eos_token_id"] = _eos_ids(config)
        need = max(0, int(config["min_tokens"]) - len(config.get("generated") or ()))
        if new is not None:
            need = min(need, new)
        if need > 0:
            out["min_new_tokens"] = need
    return out


def _ids(seq) -> tuple[int, ...]:
    """A sequence of ids (a tuple, or the case file's "a,b,c")."""
    if isinstance(seq, str):
        return tuple(int(t) for t in seq.split(","))
    return tuple(int(t) for t in seq)


def generation_kwargs(config: dict, temperature: float) -> dict[str, Any]:
    """The sampling arguments of ``generate`` for the config: T = 0 is greedy decoding
    (``do_sample=False``); top-k is off with ``top_k=0`` (transformers' default is 50)."""
    if temperature == 0:
        return {"do_sample": False}
    top_k, top_p, min_p = config.get("target_top_k"), config.get("target_top_p"), config.get("target_min_p")
    return {
        "do_sample": True,
        "temperature": float(temperature),
        "top_k": 0 if top_k is None else int(top_k),
        "top_p": 1.0 if top_p is None else float(top_p),
        "min_p": None if min_p is None else float(min_p),
    }


class Processors:
    """transformers' logits processors as ``generate`` configures them for a config
    (``_prepare_generation_config``, ``_prepare_special_tokens``, ``_get_logits_processor``),
    cached per sampling setting: temperature and the target filters, and the config's
    sampling parameters (``sampling_kwargs``) for ``input_ids`` = [anchor] + prompt +
    generated, as the adapters' ``generate`` gets them."""

    def __init__(self) -> None:
        self.model: TableLM | None = None
        self.cache: dict[str, Any] = {}

    def get(self, config: dict, temperature: float) -> Any:
        kwargs = {**generation_kwargs(config, temperature), **sampling_kwargs(config)}
        seq_length = 1 + len(context_of(config))  # the anchor, then prompt + generated
        key = repr((sorted(kwargs.items()), seq_length))
        if key not in self.cache:
            if self.model is None:
                self.model = TableLM(TableConfig(vocab_size=2), State(1))
            model: Any = self.model  # GenerationMixin's methods, called as generate calls them
            generation_config, _ = model._prepare_generation_config(None, **kwargs)
            model._prepare_special_tokens(generation_config, False, device="cpu", batch_size=1)
            if generation_config.min_new_tokens is not None:  # as _prepare_generated_length sets it
                generation_config.min_length = generation_config.min_new_tokens + seq_length
            self.cache[key] = model._get_logits_processor(
                generation_config=generation_config,
                input_ids_seq_length=seq_length,
                encoder_input_ids=torch.zeros(1, seq_length, dtype=torch.long),
                device="cpu",
                model_kwargs={},
            )
        return self.cache[key]

    def law(self, logits, config: dict, temperature: float, history=None) -> np.ndarray:
        """The law ``generate`` samples from when speculation is off: logits [V] -> probs [V]
        (float32 as transformers computes it, returned as float64). T = 0: the argmax's
        one-hot (``torch.argmax``: the lowest id on ties). With sampling parameters, the
        processors read ``input_ids`` = [anchor] + ``history`` (prompt + generated + the
        path), over the models' V + 1 tokens (the anchor's logit -inf), as in ``generate``."""
        scores = torch.as_tensor(np.asarray(logits, dtype=np.float64), dtype=torch.float32)[None]  # [1, V]
        V = scores.shape[1]
        if parameters_set(config):
            input_ids = torch.tensor([[V] + [int(t) for t in (history or ())]], dtype=torch.long)
            scores = torch.cat([scores, torch.full((1, 1), -np.inf)], dim=1)  # [1, V + 1]
            with one_thread():
                scores = self.get(config, temperature)(input_ids, scores)
            if temperature == 0:
                return self.greedy(scores[0, :V])
            return scores.softmax(dim=-1)[0, :V].double().numpy()
        if temperature == 0:
            return self.greedy(scores[0])
        with one_thread():
            probs = self.get(config, temperature)(torch.zeros(1, 1, dtype=torch.long), scores).softmax(dim=-1)
        return probs[0].double().numpy()

    @staticmethod
    def greedy(scores: torch.Tensor) -> np.ndarray:
        out = np.zeros(scores.shape[0])
        out[int(torch.argmax(scores))] = 1.0
        return out


PROCESSORS = Processors()


@dataclass
class Built:
    """The models of one adapter for one (V, L)."""

    state: State
    main: TableLM
    generate_kwargs: dict[str, Any]


class GenerateCycle:
    """One cycle of ``model.generate`` with table-backed models (see the module docstring)."""

    follows_uniforms = False
    prefill_first = False  # the first iteration only prefills (and emits the anchor): the root ends with it

    def __init__(self) -> None:
        self.built: dict[tuple[int, int], Built] = {}

    def root_length(self, L: int) -> int:
        return 2 if self.prefill_first else 1

    def supports(self, config: dict) -> bool:
        """Chains (K = 1, policy "rheo", m = 0) whose codes stay exact in float64, with the
        sampling parameters ``generate`` applies as docs/spec.md §9 defines them
        (``sampling_refusal``; none where the class declares no ``sampling_parameters``)."""
        if not is_chain(config) or not self.sampling_supported(config):
            return False
        V, L = config["vocab_size"], chain_length(config)
        return bool((V + 2) ** (self.root_length(L) + len(context_of(config)) + L + 1) < CODE_LIMIT)

    def sampling_supported(self, config: dict) -> bool:
        """The config's sampling parameters are ones this adapter passes to ``generate`` (and
        its prompt + generated empty where it declares none)."""
        accepted: frozenset[str] = frozenset(getattr(self, "sampling_parameters", ()))
        if not accepted and context_of(config):
            return False
        return sampling_refusal(config, accepted) is None

    def sampler_law(self, logits, config: dict, temperature: float, history=None) -> np.ndarray:
        """``Processors.law``: transformers' processors on one target row, the sampling
        parameters reading ``history`` (prompt + generated + the path)."""
        return PROCESSORS.law(logits, config, temperature, history)

    def build(self, V: int, L: int, state: State) -> Built:
        raise NotImplementedError

    def reset(self, built: Built) -> None:
        """Undo what an interrupted ``generate`` may have left behind (nothing, by default)."""

    def prompt(self, tables: Tables, L: int, context: tuple[int, ...] | None = None) -> tuple[int, ...]:
        """The prompt: the anchor, then ``context`` (prompt + generated; None when the case
        has no sampling parameters); sets ``tables.root`` (the prompt, and the anchor a
        prefill emits)."""
        anchor = tables.V
        context = context or ()
        tables.root = (anchor,) + context + ((anchor,) if self.prefill_first else ())
        return (anchor,) + context

    def cycle(self, draft_logits: Logits, target_logits: Logits, config: dict, temperature: float) -> list[int]:
        if not self.supports(config):
            raise NotImplementedError(f"{type(self).__name__} runs chains (K = 1, policy rheo, m = 0) only")
        L = chain_length(config)
        stop = StoppingCriteriaList([StopAfter(2 if self.prefill_first else 1)])
        return self.run_generate(draft_logits, target_logits, config, temperature, L + 1, stopping_criteria=stop)

    def run_generate(
        self, draft_logits: Logits, target_logits: Logits, config: dict, temperature: float, new: int, **kwargs: Any
    ) -> list[int]:
        """The tokens after the prompt of one ``model.generate`` call of at most ``new`` new
        tokens on these tables (the models built once per (V, L) and reused; ``kwargs``
        passed on, e.g. the stopping criteria that end it after one cycle)."""
        V, L = int(config["vocab_size"]), chain_length(config)
        built = self.built.get((V, L))
        if built is None:
            built = self.built[(V, L)] = self.build(V, L, State(V))
        tables = Tables(V, draft_logits, target_logits, (), config.get("draft_top_k"))
        prompt = self.prompt(tables, L, context_of(config) if parameters_set(config) else None)
        built.state.tables = tables
        self.reset(built)
        root = len(tables.root)
        if parameters_set(config):  # no mask inferred from a pad id (generate sets it to the eos id)
            kwargs["attention_mask"] = torch.ones(1, len(prompt), dtype=torch.long)
        with one_thread():
            out = built.main.generate(
                torch.tensor([prompt], dtype=torch.long),
                max_length=root + new,
                **kwargs,
                **generation_kwargs(config, temperature),
                **sampling_kwargs(config, new),
                **built.generate_kwargs,
            )
        return [int(t) for t in out[0, root:].tolist()]


def _assistant_config(model: PreTrainedModel, L: int) -> None:
    """The assistant drafts L tokens per cycle (``num_assistant_tokens``, schedule "constant")."""
    model.generation_config.num_assistant_tokens = L
    model.generation_config.num_assistant_tokens_schedule = "constant"


class AssistedCandidateGenerator(GenerateCycle):
    """``generate(assistant_model=...)``: a separate assistant model drafts a chain
    (transformers' ``AssistedCandidateGenerator``), ``_speculative_sampling`` verifies it.
    Sampling parameters: ``generate``'s own (``sampling_kwargs``); transformers hands the
    main model's processors to the assistant too, so its drafts are drawn from the processed
    draft table (and reported so)."""

    sampling_parameters = GENERATE_PARAMETERS

    def build(self, V: int, L: int, state: State) -> Built:
        main = TableLM(TableConfig(vocab_size=V + 1, layer_tables=("target",)), state)
        assistant = TableLM(TableConfig(vocab_size=V + 1, layer_tables=("draft",)), state)
        _assistant_config(assistant, L)
        return Built(state, main, {"assistant_model": assistant})


class EarlyExitCandidateGenerator(GenerateCycle):
    """``generate(assistant_early_exit=1)``: the model's first layer (the draft table) is
    the assistant, its two layers (the target table) the target. Sampling parameters as
    ``AssistedCandidateGenerator``."""

    sampling_parameters = GENERATE_PARAMETERS

    def build(self, V: int, L: int, state: State) -> Built:
        main = TableLM(TableConfig(vocab_size=V + 1, layer_tables=("draft", "target")), state)
        _assistant_config(main, L)
        return Built(state, main, {"assistant_early_exit": 1})

    def reset(self, built: Built) -> None:
        """``EarlyExitCandidateGenerator.get_candidates`` sets the model's
        ``num_hidden_layers`` to the exit layer and restores it after drafting, but not when
        drafting raises (the exact check stops runs by raising inside torch's random calls):
        the model is given back its two layers before every cycle."""
        built.main.config.num_hidden_layers = len(built.main.config.layer_tables)


class PromptLookupCandidateGenerator(GenerateCycle):
    """``generate(prompt_lookup_num_tokens=L)``: drafts from the prompt's n-grams and
    ignores the draft table; the prompt [anchor, c_1..c_L, anchor] holds the draft table's
    greedy path c as the continuation of its 1-gram. With sampling parameters the prompt is
    the case's history (anchor + prompt + generated, which the parameters read), and prompt
    lookup drafts whatever n-gram continuation it finds there (none: the cycle samples one
    token)."""

    sampling_parameters = GENERATE_PARAMETERS

    def root_length(self, L: int) -> int:
        return L + 2

    def prompt(self, tables: Tables, L: int, context: tuple[int, ...] | None = None) -> tuple[int, ...]:
        if context is not None:
            return super().prompt(tables, L, context)
        anchor = tables.V
        tables.root = (anchor,) + tables.greedy_path(L) + (anchor,)
        return tables.root

    def build(self, V: int, L: int, state: State) -> Built:
        main = TableLM(TableConfig(vocab_size=V + 1, layer_tables=("target",)), state)
        return Built(state, main, {"prompt_lookup_num_tokens": L})


class MTPCandidateGenerator(GenerateCycle):
    """``generate(use_mtp=True)``: the main model's L MTP depths (transformers' ``MtpModel``,
    loaded from the checkpoint this adapter writes) draft the chain, one token each."""

    prefill_first = True

    def build(self, V: int, L: int, state: State) -> Built:
        config = TableConfig(vocab_size=V + 1, layer_tables=("target",), num_mtp_layers=L)
        main = TableLM(config, state)
        layers = config.num_hidden_layers
        # the checkpoint layout of DeepSeek-style MTP weights: model.layers.{num_hidden_layers + k}.*
        main._keys_to_ignore_on_load_unexpected = [rf"model\.layers\.{layers + k}\." for k in range(L)]
        eh_proj = torch.zeros(2, 4, dtype=DTYPE)  # [enorm(embedding) ; hnorm(hidden)] -> [code, table]
        eh_proj[0, 0] = 1.0  # + (t + 1)
        eh_proj[0, 2] = float(state.codec.base)  # code * (V + 2)
        weights = {f"model.layers.{layers + k}.eh_proj.weight": eh_proj.clone() for k in range(L)}
        block = main.model.layers[0].weight.detach()
        weights.update({f"model.layers.{layers + k}.weight": block.clone() for k in range(L)})
        weights["model.embed_tokens.weight"] = main.model.embed_tokens.weight.detach().clone()
        folder = _checkpoint_folder()
        save_file(weights, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
        config._name_or_path = folder
        return Built(state, main, {"use_mtp": True})


class DFlashTokenCandidateGenerator(GenerateCycle):
    """``generate(assistant_model=..., speculation_type="dflash")``: a DFlash-style drafter
    drafts the block [anchor, mask x L] in one forward."""

    prefill_first = True

    def build(self, V: int, L: int, state: State) -> Built:
        main = TableLM(TableConfig(vocab_size=V + 1, layer_tables=("target",)), state)
        assistant_config = TableConfig(
            vocab_size=V + 1, layer_tables=("draft",), target_layer_ids=[0], block_size=L + 1, mask_token_id=V
        )
        assistant = TableDFlashAssistant(assistant_config, state)
        return Built(state, main, {"assistant_model": assistant, "speculation_type": "dflash"})


class SinglePositionMultiTokenCandidateGenerator(GenerateCycle):
    """``generate(assistant_model=<a Gemma-4 assistant>)``: the assistant drafts L tokens from
    one position, each from [embedding of the last token ; its last hidden state]."""

    prefill_first = True

    def build(self, V: int, L: int, state: State) -> Built:
        main = Gemma4TableForCausalLM(TableConfig(vocab_size=V + 1, layer_tables=("target",)), state)
        assistant = Gemma4AssistantTableForCausalLM(TableConfig(vocab_size=V + 1, layer_tables=("draft",)), state)
        _assistant_config(assistant, L)
        return Built(state, main, {"assistant_model": assistant})


def usd_words(V: int) -> tuple[list[str], list[str], np.ndarray]:
    """The two vocabularies of the different-tokenizer adapters: the target's words by id
    ("w0".."w{V-1}", "anchor": the tables' tokens 0..V), the assistant's by id (the target's
    words in reverse id order, then "extra", a word of its own, so that the vocabularies
    differ, as ``generate`` requires of two tokenizers), and ``ids``: the tables' token of
    each assistant id (-1 for "extra")."""
    words = [f"w{t}" for t in range(V)] + ["anchor"]
    ids = np.append(np.arange(V, -1, -1), -1)
    return words, [words[t] for t in ids[:-1]] + ["extra"], ids


class UniversalSpeculativeDecodingGenerator(GenerateCycle):
    """``generate(assistant_model=..., tokenizer=..., assistant_tokenizer=..., do_sample=True)``:
    assistant and target with different tokenizers (Universal Speculative Decoding), each a
    real fast tokenizer: a ``tokenizers`` WordLevel model over ``usd_words``, saved to a
    temporary folder and loaded by ``AutoTokenizer.from_pretrained`` (local files only), as a
    user's are. The assistant (``TableLinearHeadLM``) has a linear head, which transformers'
    ``AssistantToTargetTranslator`` prunes to the shared words, and it maps the draft tokens
    and logits to the target's ids. Sampling only: at T = 0 ``generate`` takes
    ``AssistedCandidateGeneratorDifferentTokenizers`` instead.

    The translator orders the pruned head by the assistant's ``get_vocab()``, which for a real
    fast tokenizer is its hash map's order, different from call to call and process to
    process; whether this adapter is lossless therefore depends on the build
    (docs/transformers.md, second defect): ``shared_order`` says what transformers saw."""

    def supports(self, config: dict) -> bool:
        return super().supports(config) and config.get("temperature", 1.0) > 0

    def tokenizer(self, words: list[str]) -> Any:
        """A tokenizer over ``words`` (id = position)."""
        return _saved_tokenizer(words)

    def build(self, V: int, L: int, state: State) -> Built:
        words, assistant_words, ids = usd_words(V)
        main = TableLM(TableConfig(vocab_size=V + 1, layer_tables=("target",)), state)
        assistant = TableLinearHeadLM(TableConfig(vocab_size=V + 2, layer_tables=("draft",)), state, ids=ids)
        _assistant_config(assistant, L)
        kwargs = {
            "assistant_model": assistant,
            "tokenizer": self.tokenizer(words),
            "assistant_tokenizer": self.tokenizer(assistant_words),
        }
        return Built(state, main, kwargs)

    def shared_order(self, V: int, L: int) -> list[int] | None:
        """The assistant ids of the shared words in the order the assistant's ``get_vocab()``
        listed them when transformers built the translator of the (V, L) models (its
        ``assistant_overlap_token_ids``, the rows of the pruned head); None before the first
        cycle on them. The pruned logits are lossless where this is sorted (id order)."""
        built = self.built.get((V, L))
        if built is None:
            return None
        inner = AssistantVocabTranslatorCache._cache.get(built.generate_kwargs["tokenizer"])
        translator = None if inner is None else inner.get(built.generate_kwargs["assistant_tokenizer"])
        if translator is None or not hasattr(translator, "assistant_overlap_token_ids"):
            return None
        return [int(a) for a in translator.assistant_overlap_token_ids.tolist()]


class UniversalSpeculativeDecodingPermuted(UniversalSpeculativeDecodingGenerator):
    """``UniversalSpeculativeDecodingGenerator`` with tokenizers made in memory
    (``WordTokenizer``) whose ``get_vocab()`` lists the words in a permutation of their ids
    drawn from a fixed seed, the same in every process and call: the second defect's
    counterexample reproduces everywhere (docs/transformers.md)."""

    def tokenizer(self, words: list[str]) -> Any:
        return _tokenizer(words)


class AssistedCandidateGeneratorDifferentTokenizers(UniversalSpeculativeDecodingGenerator):
    """``generate`` with two tokenizers and ``do_sample=False`` (Universal Assisted
    Generation, greedy only): the drafts go through text (decode with one tokenizer, encode
    with the other) and are checked against the target's argmax; T = 0 only."""

    def supports(self, config: dict) -> bool:
        return GenerateCycle.supports(self, config) and config.get("temperature", 1.0) == 0


VOCAB_SEED = 1  # the first seed whose order is not id order for the shared words at any V from 2 to 8


def vocab_permutation(n: int) -> list[int]:
    """The order in which ``WordTokenizer.get_vocab()`` lists the ids 0..n-1: a permutation
    fixed by ``VOCAB_SEED`` for each n, the ids sorted by the SHA-256 of "seed:n:id" (no
    random generator: the exact check refuses draws it cannot follow inside a cycle)."""
    return sorted(range(n), key=lambda i: hashlib.sha256(f"{VOCAB_SEED}:{n}:{i}".encode()).digest())


class WordTokenizer(transformers.PreTrainedTokenizerFast):
    """A word-level tokenizer made in memory (a ``tokenizers`` WordLevel model, words split
    on whitespace) whose ``get_vocab()`` lists its words in ``vocab_permutation`` order: a
    dict's order is no part of its contract, and a fast tokenizer's is its hash map's, which
    changes from call to call; this one is fixed, so that a check of code that depends on it
    is reproducible (docs/transformers.md, "Universal speculative decoding")."""

    def get_vocab(self) -> dict[str, int]:
        by_id = sorted(super().get_vocab().items(), key=lambda item: item[1])
        return dict(by_id[i] for i in vocab_permutation(len(by_id)))


def _word_level(words: list[str]) -> Tokenizer:
    model = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=words[-1]))
    model.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return model


def _tokenizer(words: list[str]) -> WordTokenizer:
    """A ``WordTokenizer`` over ``words`` (id = position)."""
    return WordTokenizer(tokenizer_object=_word_level(words))


def _saved_tokenizer(words: list[str]) -> Any:
    """A fast tokenizer over ``words`` (id = position) as a user gets one: the ``tokenizers``
    model saved as tokenizer.json (with a tokenizer_config.json) to a temporary folder and
    loaded by ``AutoTokenizer.from_pretrained(folder, local_files_only=True)``."""
    folder = _checkpoint_folder()
    _word_level(words).save(os.path.join(folder, "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast"}
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


_FOLDERS: list[str] = []


def _remove_folders() -> None:
    for folder in _FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)


def _checkpoint_folder() -> str:
    """A temporary folder for a checkpoint, removed when the process ends."""
    if not _FOLDERS:
        atexit.register(_remove_folders)
    folder = tempfile.mkdtemp(prefix="rheo-transformers-")
    _FOLDERS.append(folder)
    return folder
