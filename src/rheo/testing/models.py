"""A case's draft and target tables as small causal LMs, for adapters of library loops that
call a *model* (``model(input_ids) -> logits at every position``) rather than the
protocol's table functions (docs/adapters.md, "Library loops that call a model").

- ``TableCausalLM(logits, prompt, depth, table)``: a ``torch.nn.Module``; ``forward(input_ids
  [B, S], attention_mask [B, S] = None)`` returns float64 logits ``[B, S, V]``, cache-free
  (every call reads the whole sequence).
- ``as_transformers(lm)``: the same model as a transformers ``PreTrainedModel``
  (``model(input_ids=..., attention_mask=...).logits``, ``.config.vocab_size``, ``.device``,
  ``.dtype``; no ``generate``, no cache). transformers is imported on first use only.
- ``table_models(draft_logits, target_logits, config)``: the draft and target models of one
  ``cycle`` call.

**Positions.** ``prompt`` is the token ids a loop puts before the tokens it drafts (at
least one). The *cycle root* is the prompt's last position: as a causal LM's output at
position t is the law of the token after it, position ``len(prompt) - 1`` answers the
table at the root path ``()``, and a position t >= len(prompt) - 1 answers the table at the
path ``tuple(ids[len(prompt) : t + 1])``: the tokens after the prompt, up to and including
position t. So for ``ids = prompt + [x1, ..., xn]`` the output rows ``len(prompt) - 1 + i``
(i = 0..n) are the table at ``(x1, ..., xi)``, the same paths the protocol's template asks
(``target_logits([drafts[:i] for i in range(L + 1)])``). Positions before the root answer
zeros (the uniform law: never a law a correct cycle samples from or compares with). A
sequence that does not begin with the prompt raises ``ValueError``. With
``attention_mask``, the positions where it is 0 are left out of the sequence (left or right
padding) and answer zeros.

**Depth (lossless beyond the table).** The protocol's draft table answers paths of length
0..D-1 and the target's 0..D (docs/adapters.md, "Depth"); a loop that drafts D tokens and
verifies them in one target forward stays within them. Beyond:

- the *draft* at a path of length k >= D answers its deepest row on that path, the table at
  ``path[:D - 1]``. Loops often run the draft over the last drafted token too (one forward
  over the whole chain, or to refresh a cache), so this is an answer, not an error. It
  cannot change a correct loop's output law: in a cycle of D drafts no token is drawn from a
  draft law at depth D (a (D+1)-th draft would need the target at depth D+1, below), and
  rejection sampling emits the target law whatever the draft law is. It is deliberately
  *not* the target's law: a loop that misreads a draft row as a target row there would
  then be handed p = q and its bug hidden.
- the *target* at a path longer than D raises ``TableDepthError``: a correct cycle (at most
  D drafts and one bonus or correction token, 1 to D+1 tokens) never asks there, and no
  table holds a law there (a case file has none; a made-up row could only let a loop that
  drafts too deep emit a token of no target law). The error names the depth.

Logits are the tables' own: untempered, unfiltered, ``-inf`` for probability 0; the loop
applies temperature and filters, as with a real model.

>>> import numpy as np
>>> table = lambda paths: np.array([[float(len(p)), 0.0, -1.0] for p in paths])
>>> lm = TableCausalLM(table, prompt=[2, 0], depth=2, table="target")
>>> lm(torch.tensor([[2, 0, 1, 1]]))[0, :, 0].tolist()  # before the root, (), (1,), (1, 1)
[0.0, 0.0, 1.0, 2.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import torch

TableFn = Callable[[list], Any]  # paths (tuples of ints from the root) -> logits [len(paths), V]
Path = tuple[int, ...]


class TableDepthError(LookupError):
    """The target table was asked at a path longer than the depth D (no law there)."""


class TableCausalLM(torch.nn.Module):
    """A causal LM over a table: ``forward(input_ids [B, S], attention_mask=None)`` ->
    logits ``[B, S, V]`` (``dtype``, default float64), position t the table at the tokens
    after ``prompt`` up to and including t (the module docstring: positions and depth).

    ``logits``: the protocol's ``draft_logits`` or ``target_logits``; ``table``: "draft" or
    "target" (which depth rule applies); ``depth``: D, ``config["depth"]``; ``vocab_size``:
    V (asked of the table at the root when not given). Rows are asked once per path and
    kept (the tables are fixed during a cycle)."""

    anchor: torch.Tensor

    def __init__(
        self,
        logits: TableFn,
        prompt: Sequence[int],
        depth: int,
        table: str = "target",
        *,
        vocab_size: int | None = None,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__()
        if table not in ("draft", "target"):
            raise ValueError(f'table must be "draft" or "target", not {table!r}')
        if int(depth) < 1:
            raise ValueError(f"depth must be at least 1, not {depth}")
        self.prompt: Path = tuple(int(t) for t in prompt)
        if not self.prompt:
            raise ValueError("the prompt needs at least one token: its last position is the cycle root")
        self.logits, self.depth, self.table = logits, int(depth), table
        self._rows: dict[Path, np.ndarray] = {}
        self.vocab_size = int(vocab_size) if vocab_size is not None else self.rows([()]).shape[1]
        # no weights: this empty buffer carries the device and dtype (``.to(...)`` moves it)
        self.register_buffer("anchor", torch.zeros(0, dtype=dtype), persistent=False)

    @property
    def device(self) -> torch.device:
        return self.anchor.device

    @property
    def dtype(self) -> torch.dtype:
        return self.anchor.dtype

    def table_path(self, path: Path) -> Path:
        """The path whose table row answers ``path``: itself within the table, the draft's
        deepest row on it beyond (``path[:D - 1]``); raises ``TableDepthError`` for the target
        past D."""
        if self.table == "draft" and len(path) >= self.depth:
            return path[: self.depth - 1]
        if self.table == "target" and len(path) > self.depth:
            raise TableDepthError(
                f"the target model was asked at a path of {len(path)} tokens after the prompt, past the depth "
                f"D = {self.depth}: a cycle verifies at most D drafted tokens, asking the target at paths of "
                f"0..D tokens (prompt + D drafts); draft at most config['depth'] tokens"
            )
        return path

    def rows(self, paths: list[Path]) -> np.ndarray:
        """float64 [len(paths), V]: the table's rows at ``paths`` (the depth rule applied)."""
        wanted = [self.table_path(p) for p in paths]
        new = list(dict.fromkeys(p for p in wanted if p not in self._rows))
        if new:
            got = np.asarray(self.logits(new), dtype=np.float64)
            if got.ndim != 2 or got.shape[0] != len(new):
                raise ValueError(f"the {self.table} table answered shape {got.shape} for {len(new)} paths")
            self._rows.update(zip(new, got))
        return np.stack([self._rows[p] for p in wanted]) if wanted else np.zeros((0, 0))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **unused: Any) -> Any:
        """input_ids [B, S] (token ids), attention_mask [B, S] (0 = padding) -> logits [B, S, V]."""
        ids = torch.as_tensor(input_ids)
        if ids.dim() != 2:
            raise ValueError(f"input_ids must be [batch, seq], not of shape {tuple(ids.shape)}")
        B, S = ids.shape
        tokens = ids.tolist()
        mask = None if attention_mask is None else torch.as_tensor(attention_mask).tolist()
        P, V = len(self.prompt), self.vocab_size
        where: list[tuple[int, int]] = []  # (row, position) of each answered path
        paths: list[Path] = []
        for b in range(B):
            kept = [s for s in range(S) if mask is None or mask[b][s]]
            seq = tuple(int(tokens[b][s]) for s in kept)
            if seq[:P] != self.prompt[: len(seq)]:
                raise ValueError(
                    f"row {b} of input_ids does not begin with the prompt {list(self.prompt)} "
                    f"(it begins {list(seq[:P])}); left padding needs attention_mask"
                )
            bad = [t for t in seq[P:] if not 0 <= t < V]
            if bad:
                raise ValueError(f"row {b} of input_ids holds token {bad[0]} outside the vocabulary 0..{V - 1}")
            for j in range(P - 1, len(seq)):
                where.append((b, kept[j]))
                paths.append(seq[P : j + 1])
        out = np.zeros((B, S, V), dtype=np.float64)
        if paths:
            rows = self.rows(paths)
            bs, ss = zip(*where)
            out[list(bs), list(ss)] = rows
        return torch.from_numpy(out).to(device=ids.device, dtype=self.dtype)


def table_models(
    draft_logits: TableFn,
    target_logits: TableFn,
    config: dict,
    prompt: Sequence[int] | None = None,
    *,
    transformers: bool = False,
    dtype: torch.dtype = torch.float64,
) -> tuple[Any, Any]:
    """(draft, target) models of one ``cycle`` call: ``TableCausalLM``s of depth
    ``config["depth"]`` over ``config["vocab_size"]`` tokens (``as_transformers`` of them
    with ``transformers=True``). ``prompt``: by default the case's history, ``config``'s
    "prompt" + "generated" (with sampling parameters), else ``[0]``."""
    if prompt is None:
        prompt = [*config.get("prompt", ()), *config.get("generated", ())] or [0]
    V, D = int(config["vocab_size"]), int(config["depth"])
    draft = TableCausalLM(draft_logits, prompt, D, "draft", vocab_size=V, dtype=dtype)
    target = TableCausalLM(target_logits, prompt, D, "target", vocab_size=V, dtype=dtype)
    if transformers:
        return as_transformers(draft), as_transformers(target)
    return draft, target


def as_transformers(lm: TableCausalLM) -> Any:
    """``lm`` as a transformers ``PreTrainedModel`` (``TableCausalLMForTransformers``):
    ``model(input_ids=..., attention_mask=...)`` returns a ``CausalLMOutputWithPast`` whose
    ``.logits`` are ``lm``'s (``logits_to_keep`` = n > 0 keeps the last n positions);
    ``.config`` is a ``TableLMConfig`` with ``vocab_size``; ``.device`` and ``.dtype`` are
    ``lm``'s. Cache-free: a ``past_key_values`` or ``cache`` raises ``NotImplementedError``,
    and there is no ``generate``. transformers is imported on the first call: call
    ``transformers_classes()`` where the adapter is made, so that the import does not happen
    first inside a ``cycle`` that exact certification follows (importing it draws from
    Python's ``random``, which sends that case to the slower concrete enumeration)."""
    config_class, model_class = transformers_classes()
    return model_class(config_class(vocab_size=lm.vocab_size, dtype=lm.dtype), lm).to(lm.device)


@lru_cache(maxsize=1)
def transformers_classes() -> tuple[Any, Any]:
    """(``TableLMConfig``, ``TableCausalLMForTransformers``), made on first use so that this
    module needs only torch."""
    from transformers import PretrainedConfig, PreTrainedModel
    from transformers.modeling_outputs import CausalLMOutputWithPast

    class TableLMConfig(PretrainedConfig):
        """A table model's configuration: ``vocab_size`` alone matters."""

        model_type = "rheo_testing_table"

        def __init__(self, vocab_size: int = 2, **kwargs: Any) -> None:
            self.vocab_size = vocab_size
            self.hidden_size = 1
            self.num_hidden_layers = 0
            self.num_attention_heads = 1
            super().__init__(**kwargs)

    class TableCausalLMForTransformers(PreTrainedModel):
        """A ``TableCausalLM`` (``.lm``) behind transformers' model interface."""

        config_class = TableLMConfig
        base_model_prefix = "lm"

        def __init__(self, config: Any, lm: TableCausalLM) -> None:
            super().__init__(config)
            self.lm = lm
            # transformers reads .dtype from a floating-point parameter: one, never trained
            self.dtype_carrier = torch.nn.Parameter(torch.zeros(1, dtype=lm.dtype), requires_grad=False)
            self.post_init()

        def _init_weights(self, module: torch.nn.Module) -> None:
            """Nothing random: there are no weights."""

        def forward(
            self,
            input_ids: torch.Tensor | None = None,
            attention_mask: torch.Tensor | None = None,
            position_ids: torch.Tensor | None = None,
            past_key_values: Any = None,
            inputs_embeds: torch.Tensor | None = None,
            use_cache: bool | None = None,
            logits_to_keep: int = 0,
            cache: Any = None,
            **kwargs: Any,
        ) -> Any:
            if input_ids is None or inputs_embeds is not None:
                raise NotImplementedError("a table model reads input_ids (token paths), not inputs_embeds")
            if past_key_values is not None or cache is not None:
                raise NotImplementedError("a table model is cache-free: pass the whole sequence, without a cache")
            logits = self.lm(input_ids, attention_mask)
            if logits_to_keep:
                logits = logits[:, -logits_to_keep:]
            return CausalLMOutputWithPast(logits=logits)

    for made in (TableLMConfig, TableCausalLMForTransformers):
        made.__qualname__ = made.__name__
    return TableLMConfig, TableCausalLMForTransformers
