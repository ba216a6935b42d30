"""transformers' own assisted generation through the ``rheo gate --impl`` protocol.

Nothing of transformers is copied here: each adapter imports the installed package and runs
its code unmodified. Checked with transformers 5.24.0 (docs/transformers.md has the verdicts).

- ``SpeculativeSampling``: ``transformers.generation.utils._speculative_sampling``, the chain
  verifier, called as the protocol's ``verify`` on chain trees (K = 1, policy "rheo", m = 0;
  every node a sample whose ``sample_probs`` row is the law q it was drawn from).
- One adapter per candidate generator transformers ships, named like it:
  ``AssistedCandidateGenerator``, ``EarlyExitCandidateGenerator``,
  ``PromptLookupCandidateGenerator``, ``MTPCandidateGenerator``,
  ``DFlashTokenCandidateGenerator``, ``SinglePositionMultiTokenCandidateGenerator``,
  ``UniversalSpeculativeDecodingGenerator`` and
  ``AssistedCandidateGeneratorDifferentTokenizers``. Each is the protocol's whole-cycle
  ``cycle``: ONE draft-verify cycle of the real ``model.generate(...)`` (``do_sample=True``;
  ``do_sample=False`` at T = 0), with tiny table-backed models. ``generate`` itself picks
  the generator (``_get_candidate_generator``) from its arguments and models, as it does
  for a user; the adapter never builds one. ``StopAfter`` ends ``generate`` after the
  first verification (after the second iteration for the generators whose first one only
  prefills).

Glossary (the words of docs/spec.md and of transformers' ``_assisted_decoding``):

- *root*: the token sequence the cycle starts from (the prompt, plus an *anchor* token for
  the generators whose first ``generate`` iteration only prefills); the protocol's token
  paths are the tokens after it.
- *anchor*: token id V (the models' vocabulary is V + 1): the prompt's token, which both
  tables give probability 0 after the root; before the root the target model puts all its
  mass on it, so a prefill iteration emits it deterministically.
- *chain length* L = min(depth, budget): the number of draft tokens of the cycle
  (``num_assistant_tokens``, ``prompt_lookup_num_tokens``, ``num_mtp_layers``, or DFlash's
  ``block_size`` - 1).
- *code*: a token sequence as one integer, code(s + (t,)) = code(s) * (V + 2) + t + 1,
  code(()) = 0 (``Codec``), carried in float64 hidden states so that a layer (transformers'
  own MTP ``eh_proj`` among them) extends a path by one token with a linear map. Exact while
  codes stay below 2^53 (``supports`` refuses larger cases).

The table-backed models (``TableLM``): a token's input embedding is [t + 1, 0], the first
digit of its code; the cache keeps those digits as its keys (so ``crop`` and cached decoding
work as they do for a real model); hidden states are [code, table] per position (table 0 =
target, 1 = draft); a ``TableLayer`` sets the table of its output; the head (``TableHead``,
the ``lm_head``) decodes the code and returns the logits the case's table gives for the path
since the root (the anchor's one-hot before the root). How each generator's drafter is built:

- ``AssistedCandidateGenerator``: a separate assistant ``TableLM`` whose one layer is the
  draft table; ``num_assistant_tokens`` = L, schedule "constant", transformers' default
  ``assistant_confidence_threshold`` (0.4) left on: drafting stops early after a token the
  assistant gives less than 0.4.
- ``EarlyExitCandidateGenerator``: one ``TableLM`` with two layers, the first the draft
  table and the second the target table; ``assistant_early_exit=1`` makes transformers run
  the model itself truncated to its first layer as the assistant.
- ``PromptLookupCandidateGenerator``: **ignores the draft table** (it drafts n-grams from
  the prompt, without logits). The prompt [anchor, c_1..c_L, anchor] makes its 1-gram search
  propose c_1..c_L, the draft table's greedy path (argmax at each prefix, lowest id on
  ties); candidate_logits is None, so ``_assisted_decoding`` samples every position from
  the target and keeps drafts up to the first mismatch.
- ``MTPCandidateGenerator``: the main ``TableLM`` declares ``num_mtp_layers`` = L and
  ships MTP weights in a checkpoint written once per (V, L) to a temporary folder
  (``config.name_or_path``), which ``MtpModel.from_pretrained`` loads in every ``generate``
  call: each MTP depth is transformers' ``MtpLayer`` (``enorm``, ``hnorm``, ``eh_proj``, a
  ``TableLayer`` block set to the draft table, ``post_norm``), its ``eh_proj`` weights
  extending the code by the input token, and the head shared with the main model.
- ``DFlashTokenCandidateGenerator``: a DFlash-style assistant (``TableDFlashAssistant``:
  ``target_layer_ids``, ``block_size`` = L + 1, ``mask_token_id``) that drafts the whole
  block in one forward, from the main model's hidden states and the anchor's embedding;
  the main model's ``lm_head`` turns its hidden states into the candidate logits. Its
  block position 1 gives the draft table's root law; position i > 1 cannot see the tokens
  drawn before it in the same block (they are drawn after the forward), so it gives the
  draft table's law at the table's greedy path of length i - 1.
- ``SinglePositionMultiTokenCandidateGenerator``: a Gemma-4-style pair, the path
  ``generate`` takes for Gemma-4 assistant models: ``Gemma4TableForCausalLM`` (a
  ``TableLM`` that returns ``shared_kv_states``, its cached digits) and
  ``Gemma4AssistantTableForCausalLM``, which reads [embedding of the last token ; the last
  hidden state] at one position and returns the draft table's logits and its own hidden
  state, as Gemma 4's assistant does (the names are what ``generate`` and the generator
  check, a class-name prefix; the shared key/value states are accepted and not needed).
- ``UniversalSpeculativeDecodingGenerator`` (T > 0) and
  ``AssistedCandidateGeneratorDifferentTokenizers`` (T = 0, greedy only): target and
  assistant with different tokenizers (``WordTokenizer``, made in memory): the assistant's
  has the target's words in reverse id order plus one word of its own, and the assistant
  (``TableLinearHeadLM``) has a real linear head, which transformers prunes to the shared
  words; transformers maps its tokens and logits to the target's ids.

Randomness is transformers' own (torch's global generator: ``torch.multinomial``,
``torch.rand_like``), ``follows_uniforms = False``. ``sampler_law`` is built from
transformers' own logits processors as ``generate`` configures them (temperature, top-k with
``top_k=0`` when off, top-p, min-p; T = 0 greedy: the argmax, lowest id on ties).

    rheo gate --impl rheo.integrations.transformers_assisted:SpeculativeSampling
    rheo gate --impl rheo.integrations.transformers_assisted:AssistedCandidateGenerator
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import transformers
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers
from torch import nn
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.generation.stopping_criteria import StoppingCriteria, StoppingCriteriaList
from transformers.generation.utils import _speculative_sampling
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast

TRANSFORMERS_CHECKED = "5.24.0"
CODE_LIMIT = 2**53  # float64 holds every integer below this exactly
DTYPE = torch.float64

Logits = Callable[[list], np.ndarray]  # paths -> [len(paths), V] untempered, untruncated logits


# ---- the case's tables, as the models see them during one cycle ----


class Tables:
    """The draft and target tables of one cycle: rows of V + 1 logits (the anchor's last,
    -inf) at token paths since the root, with the config's draft_top_k applied to the draft.

    >>> t = Tables(2, lambda p: np.log([[0.25, 0.75]] * len(p)), lambda p: np.zeros((len(p), 2)), (2,), None)
    >>> t.row("draft", ()).tolist()[2], t.greedy_path(2)
    (-inf, (1, 1))
    """

    def __init__(self, vocab_size: int, draft: Logits, target: Logits, root: tuple[int, ...], draft_top_k):
        self.V, self.draft, self.target, self.root, self.draft_top_k = vocab_size, draft, target, root, draft_top_k
        self.memo: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}

    def row(self, table: str, path: tuple[int, ...]) -> np.ndarray:
        """[V + 1] float64 logits of ``table`` ("draft" or "target") at ``path``."""
        key = (table, path)
        out = self.memo.get(key)
        if out is None:
            fn = self.draft if table == "draft" else self.target
            logits = np.asarray(fn([path]), dtype=np.float64)[0]  # [V]
            if table == "draft" and self.draft_top_k is not None and self.draft_top_k < self.V:
                drop = np.argsort(-logits, kind="stable")[self.draft_top_k :]  # ties: the lower id is kept
                logits = logits.copy()
                logits[drop] = -np.inf
            out = self.memo[key] = np.append(logits, -np.inf)
        return out

    def greedy_path(self, length: int, start: tuple[int, ...] = ()) -> tuple[int, ...]:
        """The draft table's argmax path of ``length`` tokens after ``start`` (lowest id on ties)."""
        path = start
        for _ in range(length):
            path += (int(np.argmax(self.row("draft", path))),)
        return path[len(start) :]


class Codec:
    """Token sequences <-> integer codes in base V + 2 (digit t + 1 for token t).

    >>> c = Codec(3)
    >>> c.encode((3, 0, 2)), c.decode(c.encode((3, 0, 2)))
    (108, (3, 0, 2))
    """

    def __init__(self, vocab_size: int):
        self.base = vocab_size + 2

    def encode(self, tokens) -> int:
        code = 0
        for t in tokens:
            code = code * self.base + int(t) + 1
        return code

    def decode(self, code: int) -> tuple[int, ...]:
        out = []
        while code > 0:
            code, digit = divmod(code, self.base)
            out.append(digit - 1)
        return tuple(reversed(out))


class State:
    """What the models read during a cycle: its ``Tables`` (set by the adapter per cycle)."""

    def __init__(self, vocab_size: int):
        self.codec = Codec(vocab_size)
        self.anchor = vocab_size
        self.tables: Tables | None = None

    def path(self, code: int) -> tuple[int, ...] | None:
        """The token path since the root of the sequence ``code`` stands for (None before the root)."""
        assert self.tables is not None  # set by the adapter before generate
        seq, root = self.codec.decode(code), self.tables.root
        return seq[len(root) :] if seq[: len(root)] == root else None

    def logits(self, codes: list[int], tables: list[str]) -> torch.Tensor:
        """[n, V + 1] float64: the table's row at each code's path; the anchor's one-hot before the root."""
        assert self.tables is not None
        out = np.full((len(codes), self.anchor + 1), -np.inf)
        for i, (code, table) in enumerate(zip(codes, tables)):
            path = self.path(code)
            if path is None:
                out[i, self.anchor] = 0.0
            else:
                out[i] = self.tables.row(table, path)
        return torch.from_numpy(out)


# ---- the table-backed models ----


class TableConfig(PretrainedConfig):
    """A table-backed model: vocabulary V + 1 (``vocab_size``), hidden states [code, table],
    one layer per entry of ``layer_tables`` ("draft" or "target")."""

    model_type = "rheo_table"

    def __init__(
        self,
        vocab_size: int = 4,
        layer_tables: tuple[str, ...] | list[str] = ("target",),
        num_mtp_layers: int | None = None,
        target_layer_ids: list[int] | None = None,
        block_size: int | None = None,
        mask_token_id: int | None = None,
        **kwargs: Any,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = 2
        self.layer_tables = list(layer_tables)
        self.num_hidden_layers = len(self.layer_tables)
        self.num_attention_heads = self.num_key_value_heads = self.head_dim = 1
        self.rms_norm_eps = 1e-6
        kwargs.setdefault("dtype", DTYPE)
        if num_mtp_layers is not None:  # only a model with MTP weights has the field (MTPCandidateGenerator)
            self.num_mtp_layers = num_mtp_layers
        if block_size is not None:  # a DFlash assistant
            self.target_layer_ids, self.block_size, self.mask_token_id = target_layer_ids, block_size, mask_token_id
        super().__init__(**kwargs)

    def get_mtp_config(self) -> PretrainedConfig:
        """transformers' MTP config (a copy of this one), every MTP depth's block the draft table."""
        config = super().get_mtp_config()
        config.layer_tables = ["draft"] * self.num_mtp_layers
        return config


class TableNorm(nn.Module):
    """The identity, where a layer has a norm (MTP copies the norm class of the model's last layer)."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return hidden_states


class TableLayer(nn.Module):
    """A decoder layer: hidden states [code, table] in, the same codes with this layer's table out."""

    def __init__(self, config: TableConfig, layer_idx: int = 0):
        super().__init__()
        self.input_layernorm = TableNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.table = float(config.layer_tables[layer_idx] == "draft")
        # [1, 0] times the hidden state, so that the layer has a weight (transformers reads the
        # device from one) and a checkpoint has something to load into an MTP block
        self.weight = nn.Parameter(torch.tensor([1.0, 0.0], dtype=DTYPE), requires_grad=False)

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = hidden_states * self.weight  # [b, n, 2]
        out[..., 1] = self.table
        return out


class TableHead(nn.Module):
    """The ``lm_head``: hidden states [b, n, 2] -> logits [b, n, vocabulary] from the tables.
    ``ids[m]`` is the tables' token (0..V, the anchor V) of the model's token m, -1 for a
    padding slot (logit -inf); the identity unless the model has a vocabulary of its own."""

    def __init__(self, state: State, ids: np.ndarray):
        super().__init__()
        self.state, self.ids = state, ids
        self.weight = nn.Parameter(torch.zeros(1, dtype=DTYPE), requires_grad=False)  # where the head lives

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        b, n = hidden_states.shape[:2]
        flat = hidden_states.reshape(-1, 2).tolist()
        codes = [int(code) for code, _ in flat]
        tables = ["draft" if table > 0.5 else "target" for _, table in flat]
        logits = self.state.logits(codes, tables)  # [b n, V + 1]
        if len(self.ids) != logits.shape[1] or (self.ids != np.arange(len(self.ids))).any():
            logits = torch.cat([logits, torch.full((len(codes), 1), -np.inf, dtype=DTYPE)], 1)[:, self.ids]
        return logits.to(hidden_states.dtype).reshape(b, n, -1)


def _embedding(ids: np.ndarray) -> nn.Embedding:
    """The model's token m -> [ids[m] + 1, 0]: the first digit of its code (float64, no
    random initialisation)."""
    weight = torch.zeros(len(ids), 2, dtype=DTYPE)
    weight[:, 0] = torch.as_tensor(ids + 1, dtype=DTYPE)
    return nn.Embedding.from_pretrained(weight, freeze=True)


def identity_ids(vocab_size: int, model_vocab: int) -> np.ndarray:
    """The tables' tokens 0..V (V + 1 = ``vocab_size`` of them) as the model's first ids, then padding."""
    return np.array([m if m < vocab_size else -1 for m in range(model_vocab)])


class TableDecoder(nn.Module):
    """The base model (``TableLM.model``): embedding and layers; its ``config`` is the LM's own."""

    def __init__(self, config: TableConfig, ids: np.ndarray):
        super().__init__()
        self.config = config
        self.embed_tokens = _embedding(ids)
        self.layers = nn.ModuleList([TableLayer(config, i) for i in range(config.num_hidden_layers)])


@dataclass
class TableLMOutput(CausalLMOutputWithPast):
    """transformers' causal-LM output plus ``shared_kv_states`` (Gemma 4's, for its assistant)."""

    shared_kv_states: dict | None = None


class TablePreTrainedModel(PreTrainedModel):
    config_class = TableConfig
    base_model_prefix = "model"
    _supports_sdpa = True

    def _init_weights(self, module: nn.Module) -> None:
        """Nothing random: every weight is set where the module is made."""


class TableLM(TablePreTrainedModel, GenerationMixin):
    """A causal LM whose logits at each position are the case's table at the token path since
    the root (``TableHead``); its cache keeps the token ids (keys [1, 1, seq, 1]). ``ids``:
    the tables' token of each of its own tokens (``TableHead``), the identity by default."""

    def __init__(self, config: TableConfig, state: State, ids: np.ndarray | None = None):
        super().__init__(config)
        self.ids = identity_ids(state.anchor + 1, config.vocab_size) if ids is None else ids
        self.model = TableDecoder(config, self.ids)
        self.lm_head = TableHead(state, self.ids)
        self.state = state
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.model.embed_tokens

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head

    def get_decoder(self) -> nn.Module:
        return self.model

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        """Hidden states [b, n, 2] -> logits [b, n, vocabulary]."""
        return self.lm_head(hidden)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        cache: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int = 0,
        output_hidden_states: Any = None,
        return_shared_kv_states: bool | None = None,
        **kwargs: Any,
    ) -> TableLMOutput:
        assert input_ids is not None  # the generators call it with token ids
        # the first digit of each token's code (the tables' token + 1), from the input
        # embeddings as a real model reads its tokens (transformers may swap the module)
        digits = self.get_input_embeddings()(input_ids)[..., :1].to(DTYPE)  # [1, n, 1]
        keys = digits[:, None]  # [1, 1, n, 1]: the cache keeps the digits
        if cache is not None:
            keys, _ = cache.update(keys, keys, 0)
        n, codec = input_ids.shape[1], self.state.codec
        codes, code = [], 0
        for digit in keys[0, 0, :, 0].tolist():
            code = code * codec.base + int(digit)
            codes.append(float(code))
        hidden = torch.zeros(1, n, 2, dtype=DTYPE)
        hidden[0, :, 0] = torch.tensor(codes[len(codes) - n :], dtype=DTYPE)
        states = [hidden]
        for layer in self.model.layers[: self.config.num_hidden_layers]:  # early exit truncates this
            hidden = layer(hidden)
            states.append(hidden)
        logits = self.project(hidden[:, -logits_to_keep:] if logits_to_keep else hidden)
        shared = None
        if return_shared_kv_states:
            shared = {name: (keys, keys) for name in ("full_attention", "sliding_attention")}
        return TableLMOutput(
            logits=logits,
            cache=cache,
            hidden_states=tuple(states) if output_hidden_states else None,
            shared_kv_states=shared,
        )


FLOOR = -1e30  # a finite logit for probability 0 (exp underflows to exactly 0), where a matmul reads logits


class SelectHead(nn.Linear):
    """A linear ``lm_head`` that reads the logits a ``TableLinearHeadLM`` hidden state
    carries (weight [vocabulary, 2 + vocabulary], one 1 per row; made without random draws)."""

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.weight)


class TableLinearHeadLM(TableLM):
    """A ``TableLM`` whose ``lm_head`` is a real ``nn.Linear``, for transformers' code that
    prunes an assistant's head (``AssistantToTargetTranslator``): the hidden state it reads
    is [code, table, the table's logits over the model's vocabulary, floored at ``FLOOR``]."""

    def __init__(self, config: TableConfig, state: State, ids: np.ndarray | None = None):
        super().__init__(config, state, ids)
        V = config.vocab_size
        self.table_head = self.lm_head
        self.lm_head = SelectHead(2 + V, V, bias=False, dtype=DTYPE)
        with torch.no_grad():
            self.lm_head.weight[torch.arange(V), 2 + torch.arange(V)] = 1.0

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        carried = torch.cat([hidden, self.table_head(hidden).clamp(min=FLOOR)], dim=-1)
        return self.lm_head(carried)


class Gemma4TableForCausalLM(TableLM):
    """The target of the Gemma-4 path (``generate`` requires the class name to start with
    "Gemma4" or "Gemma3n" for a Gemma-4 assistant): a ``TableLM``, which returns its cache's
    keys (the tokens' digits) as ``shared_kv_states``."""


@dataclass
class TableAssistantOutput(BaseModelOutputWithPast):
    """Gemma 4's assistant output: ``logits`` and ``last_hidden_state``."""

    logits: torch.Tensor | None = None


class Gemma4AssistantTableForCausalLM(TablePreTrainedModel, GenerationMixin):
    """A Gemma-4-style assistant (``SinglePositionMultiTokenCandidateGenerator`` requires
    the class name to contain "Gemma4Assistant"): at one position it reads [embedding of the
    last token ; the last hidden state] (2 + 2 values), extends the hidden state's code by
    the token and returns the draft table's logits there with the new hidden state."""

    def __init__(self, config: TableConfig, state: State):
        super().__init__(config)
        self.layer = TableLayer(config)
        self.lm_head = TableHead(state, identity_ids(state.anchor + 1, config.vocab_size))
        self.state = state
        self.post_init()

    def forward(
        self,
        inputs_embeds: torch.Tensor | None = None,
        attention_mask: Any = None,
        position_ids: torch.LongTensor | None = None,
        shared_kv_states: dict | None = None,
        use_cache: bool | None = None,
        **kwargs: Any,
    ) -> TableAssistantOutput:
        assert inputs_embeds is not None  # [b, 1, 4]
        hidden = torch.zeros(*inputs_embeds.shape[:2], 2, dtype=DTYPE)
        hidden[..., 0] = inputs_embeds[..., 2] * self.state.codec.base + inputs_embeds[..., 0]
        hidden = self.layer(hidden)  # the draft table
        return TableAssistantOutput(last_hidden_state=hidden, logits=self.lm_head(hidden))


class TableDFlashAssistant(TablePreTrainedModel):
    """A DFlash-style drafter (``target_layer_ids``, ``block_size``, ``mask_token_id``): one
    forward over [anchor, mask x (block_size - 1)] given the main model's hidden states at
    ``target_layer_ids``; hidden state i (i >= 1) stands for the root's greedy draft path of
    length i - 1 with the draft table, for the main model's ``lm_head`` to turn into logits."""

    def __init__(self, config: TableConfig, state: State):
        super().__init__(config)
        self.layer = TableLayer(config)
        self.state = state
        self.post_init()

    def forward(
        self,
        noise_embeds: torch.Tensor,
        context_hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        cache: Any = None,
        **kwargs: Any,
    ) -> BaseModelOutputWithPast:
        # noise_embeds [1, block, 2]; context_hidden_states [1, accepted, 2] (one target layer)
        state, block = self.state, noise_embeds.shape[1]
        anchor_code = int(context_hidden_states[0, -1, 0]) * state.codec.base + int(noise_embeds[0, 0, 0])
        path = state.path(anchor_code)
        assert path is not None and state.tables is not None
        greedy = path + state.tables.greedy_path(block - 1, path)
        hidden = torch.zeros(1, block, 2, dtype=DTYPE)
        for i in range(block):
            hidden[0, i, 0] = float(state.codec.encode(state.tables.root + greedy[: len(path) + max(i - 1, 0)]))
        return BaseModelOutputWithPast(last_hidden_state=self.layer(hidden), cache=cache)


# ---- running generate for one cycle ----


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
    cached per sampling setting."""

    def __init__(self) -> None:
        self.model: TableLM | None = None
        self.cache: dict[tuple, Any] = {}

    def get(self, config: dict, temperature: float) -> Any:
        kwargs = generation_kwargs(config, temperature)
        key = tuple(sorted(kwargs.items()))
        if key not in self.cache:
            if self.model is None:
                self.model = TableLM(TableConfig(vocab_size=2), State(1))
            model: Any = self.model  # GenerationMixin's methods, called as generate calls them
            generation_config, _ = model._prepare_generation_config(None, **kwargs)
            model._prepare_special_tokens(generation_config, False, device="cpu", batch_size=1)
            self.cache[key] = model._get_logits_processor(
                generation_config=generation_config,
                input_ids_seq_length=1,
                encoder_input_ids=torch.zeros(1, 1, dtype=torch.long),
                device="cpu",
                model_kwargs={},
            )
        return self.cache[key]

    def law(self, logits, config: dict, temperature: float) -> np.ndarray:
        """The law ``generate`` samples from when speculation is off: logits [V] -> probs [V]
        (float32 as transformers computes it, returned as float64). T = 0: the argmax's
        one-hot (``torch.argmax``: the lowest id on ties)."""
        scores = torch.as_tensor(np.asarray(logits, dtype=np.float64), dtype=torch.float32)[None]  # [1, V]
        V = scores.shape[1]
        if temperature == 0:
            out = np.zeros(V)
            out[int(torch.argmax(scores[0]))] = 1.0
            return out
        with one_thread():
            probs = self.get(config, temperature)(torch.zeros(1, 1, dtype=torch.long), scores).softmax(dim=-1)
        return probs[0].double().numpy()


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
        """Chains (K = 1, policy "rheo", m = 0) whose codes stay exact in float64."""
        if not is_chain(config):
            return False
        V, L = config["vocab_size"], chain_length(config)
        return bool((V + 2) ** (self.root_length(L) + L + 1) < CODE_LIMIT)

    def sampler_law(self, logits, config: dict, temperature: float) -> np.ndarray:
        return PROCESSORS.law(logits, config, temperature)

    def build(self, V: int, L: int, state: State) -> Built:
        raise NotImplementedError

    def reset(self, built: Built) -> None:
        """Undo what an interrupted ``generate`` may have left behind (nothing, by default)."""

    def prompt(self, tables: Tables, L: int) -> tuple[int, ...]:
        """The prompt; sets ``tables.root``."""
        anchor = tables.V
        tables.root = (anchor, anchor) if self.prefill_first else (anchor,)
        return (anchor,)

    def cycle(self, draft_logits: Logits, target_logits: Logits, config: dict, temperature: float) -> list[int]:
        if not self.supports(config):
            raise NotImplementedError(f"{type(self).__name__} runs chains (K = 1, policy rheo, m = 0) only")
        V, L = int(config["vocab_size"]), chain_length(config)
        built = self.built.get((V, L))
        if built is None:
            built = self.built[(V, L)] = self.build(V, L, State(V))
        tables = Tables(V, draft_logits, target_logits, (), config.get("draft_top_k"))
        prompt = self.prompt(tables, L)
        built.state.tables = tables
        self.reset(built)
        root = len(tables.root)
        with one_thread():
            out = built.main.generate(
                torch.tensor([prompt], dtype=torch.long),
                max_length=root + L + 1,
                stopping_criteria=StoppingCriteriaList([StopAfter(2 if self.prefill_first else 1)]),
                **generation_kwargs(config, temperature),
                **built.generate_kwargs,
            )
        return [int(t) for t in out[0, root:].tolist()]


def _assistant_config(model: PreTrainedModel, L: int) -> None:
    """The assistant drafts L tokens per cycle (``num_assistant_tokens``, schedule "constant")."""
    model.generation_config.num_assistant_tokens = L
    model.generation_config.num_assistant_tokens_schedule = "constant"


class AssistedCandidateGenerator(GenerateCycle):
    """``generate(assistant_model=...)``: a separate assistant model drafts a chain
    (transformers' ``AssistedCandidateGenerator``), ``_speculative_sampling`` verifies it."""

    def build(self, V: int, L: int, state: State) -> Built:
        main = TableLM(TableConfig(vocab_size=V + 1, layer_tables=("target",)), state)
        assistant = TableLM(TableConfig(vocab_size=V + 1, layer_tables=("draft",)), state)
        _assistant_config(assistant, L)
        return Built(state, main, {"assistant_model": assistant})


class EarlyExitCandidateGenerator(GenerateCycle):
    """``generate(assistant_early_exit=1)``: the model's first layer (the draft table) is
    the assistant, its two layers (the target table) the target."""

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
    greedy path c as the continuation of its 1-gram."""

    def root_length(self, L: int) -> int:
        return L + 2

    def prompt(self, tables: Tables, L: int) -> tuple[int, ...]:
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


class UniversalSpeculativeDecodingGenerator(GenerateCycle):
    """``generate(assistant_model=..., tokenizer=..., assistant_tokenizer=..., do_sample=True)``:
    assistant and target with different tokenizers (Universal Speculative Decoding). The
    assistant's tokenizer has the target's words in reverse id order and one word of its own
    (so that the vocabularies differ, as ``generate`` requires of two tokenizers); the
    assistant (``TableLinearHeadLM``) has a linear head, which transformers'
    ``AssistantToTargetTranslator`` prunes to the shared words, and it maps the draft tokens
    and logits to the target's ids. Sampling only: at T = 0 ``generate`` takes
    ``AssistedCandidateGeneratorDifferentTokenizers`` instead."""

    def supports(self, config: dict) -> bool:
        return super().supports(config) and config.get("temperature", 1.0) > 0

    def build(self, V: int, L: int, state: State) -> Built:
        words = [f"w{t}" for t in range(V)] + ["anchor"]  # the tables' tokens 0..V
        # the assistant's token a is the tables' token V - a; its token V + 1 ("extra") is its own
        ids = np.append(np.arange(V, -1, -1), -1)
        main = TableLM(TableConfig(vocab_size=V + 1, layer_tables=("target",)), state)
        assistant = TableLinearHeadLM(TableConfig(vocab_size=V + 2, layer_tables=("draft",)), state, ids=ids)
        _assistant_config(assistant, L)
        kwargs = {
            "assistant_model": assistant,
            "tokenizer": _tokenizer(words),
            "assistant_tokenizer": _tokenizer([words[t] for t in ids[:-1]] + ["extra"]),
        }
        return Built(state, main, kwargs)


class AssistedCandidateGeneratorDifferentTokenizers(UniversalSpeculativeDecodingGenerator):
    """``generate`` with two tokenizers and ``do_sample=False`` (Universal Assisted
    Generation, greedy only): the drafts go through text (decode with one tokenizer, encode
    with the other) and are checked against the target's argmax; T = 0 only."""

    def supports(self, config: dict) -> bool:
        return GenerateCycle.supports(self, config) and config.get("temperature", 1.0) == 0


class WordTokenizer(transformers.PreTrainedTokenizerFast):
    """A word-level tokenizer made in memory (a ``tokenizers`` WordLevel model, words split
    on whitespace) whose ``get_vocab()`` lists its words in alphabetical order: a dict's order
    is no part of its contract, and a fast tokenizer's is its hash map's, which changes from
    process to process; this one is fixed, so that a check of code that depends on it is
    reproducible (docs/transformers.md, "Universal speculative decoding")."""

    def get_vocab(self) -> dict[str, int]:
        return dict(sorted(super().get_vocab().items()))


def _tokenizer(words: list[str]) -> WordTokenizer:
    """A ``WordTokenizer`` over ``words`` (id = position)."""
    model = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=words[-1]))
    model.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return WordTokenizer(tokenizer_object=model)


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


# ---- the chain verifier alone ----


class SpeculativeSampling:
    """``transformers.generation.utils._speculative_sampling`` as the protocol's ``verify``
    on chain trees: candidate_logits log q (the nodes' ``sample_probs`` rows, so that its
    softmax is the law each token was drawn from), new_logits the target rows (the root,
    then each node) through transformers' processors, as ``_assisted_decoding`` prepares
    them. T = 0 is not this function's case (greedy decoding takes another path)."""

    follows_uniforms = False

    def supports(self, config: dict) -> bool:
        return is_chain(config) and config.get("temperature", 1.0) > 0

    def sampler_law(self, logits, config: dict, temperature: float) -> np.ndarray:
        return PROCESSORS.law(logits, config, temperature)

    def verify(self, tree: dict, target_logits, config: dict, temperature: float, uniforms: dict) -> dict:
        parents = [int(p) for p in np.asarray(tree["parents"]).tolist()]
        child = {p: i for i, p in enumerate(parents)}
        chain, node = [], -1
        while node in child:
            node = child[node]
            chain.append(node)
        L = len(chain)
        if L == 0:
            raise NotImplementedError("an empty chain: _assisted_decoding does not call _speculative_sampling")
        tokens = [int(np.asarray(tree["tokens"])[i]) for i in chain]
        ids = torch.tensor([[0] + tokens], dtype=torch.long)  # the root's token, then the chain: [1, L + 1]
        rows = np.asarray(target_logits, dtype=np.float64)[[0] + [i + 1 for i in chain]]  # [L + 1, V]
        processors = PROCESSORS.get(config, temperature)
        with one_thread():
            new_logits = torch.as_tensor(rows, dtype=torch.float32)[None].clone()  # [1, L + 1, V]
            for i in range(L + 1):
                new_logits[:, i, :] = processors(ids[:, : 1 + i], new_logits[:, i, :])
            q = np.asarray(tree["sample_probs"], dtype=np.float64)[chain]  # [L, V]
            with np.errstate(divide="ignore"):
                candidate_logits = torch.as_tensor(np.log(q), dtype=torch.float32)[None]  # [1, L, V]
            valid, n_matches = _speculative_sampling(ids, candidate_logits, L, new_logits)
        return {"tokens": [int(t) for t in valid[0].tolist()], "accepted": chain[: int(n_matches)]}
