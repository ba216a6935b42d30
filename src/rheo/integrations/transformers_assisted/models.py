"""Table-backed transformers models: ``PreTrainedModel``s whose logits at every token path
are a case's tables (draft or target), so that transformers' own ``generate`` runs on a
case; the assistant variants each candidate generator needs (linear heads, Gemma-4's
assistant, DFlash).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast

TRANSFORMERS_CHECKED = "5.24.0"
CODE_LIMIT = 2**53  # float64 holds every integer below this exactly
DTYPE = torch.float64
Logits = Callable[[list], np.ndarray]  # paths -> [len(paths), V] untempered, untruncated logits


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
