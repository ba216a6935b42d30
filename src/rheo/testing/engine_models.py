"""Tiny real language models for running engines' own speculative decoding here: random
weights from a config and a seed, never downloaded, float32, a vocabulary of 8 to 32 words.

Each family is a transformers architecture that serving engines load (docs/engines.md):

- ``llama``: dense Llama, one layer, as many key/value heads as query heads;
- ``gqa``: Llama with grouped-query attention (4 query heads share 1 key/value head), two
  layers;
- ``sliding``: Mistral with a sliding window of 2 tokens (every attention past the window
  is masked, so a generation of a few tokens already crosses it);
- ``moe``: Mixtral, 4 experts, 2 routed per token;
- ``hybrid``: LFM2, a short-convolution layer (a recurrent state the cache must roll back)
  and an attention layer. transformers refuses assisted generation for models whose
  recurrent state it cannot crop (Qwen3-Next's gated delta layers, Mamba): "assisted
  generation is not supported with stateful models"; LFM2's convolution state it keeps
  and crops.

``tiny_model(family, vocab, seed)`` builds one; ``scripted_drafter(vocab, script)`` is a
Llama whose weights propose chosen tokens (``script[t]`` after token t, with every other
token at probability exactly 0 in float32 at any temperature >= 1/4);
``save_checkpoint(model, folder)`` writes it as a user's checkpoint folder (config,
safetensors, a word-level tokenizer built here: ``words(vocab)``); ``save_eagle_head``
writes an EAGLE draft head in the layout vLLM loads (``EagleLlamaForCausalLM``). Needs torch
and transformers (the ``hf`` extra).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers

FAMILIES = ("llama", "gqa", "sliding", "moe", "hybrid")
INIT_RANGE = 0.3  # transformers' default 0.02 gives near-uniform laws and attention blind to positions
QK_SCALE = 3.0  # sharper attention: a token's position relative to the cached ones changes the logits
ROPE_THETA = 10.0  # positions a few tokens apart rotate far apart
SCRIPT_LOGIT = 400.0  # the scripted drafter's margin: exp(-400 * 4) underflows float32 to 0


def _config(family: str, vocab: int, hidden: int, head_dim: int | None = None) -> Any:
    common: dict[str, Any] = {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "num_hidden_layers": 1,
        "max_position_embeddings": 128,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": 0,
        "tie_word_embeddings": False,
        "initializer_range": INIT_RANGE,
    }
    if head_dim is not None:  # vLLM's CPU attention takes head sizes from 32 up only
        common["head_dim"] = head_dim
    if family == "llama":
        return transformers.LlamaConfig(**common)
    if family == "gqa":
        return transformers.LlamaConfig(
            **{**common, "num_attention_heads": 4, "num_key_value_heads": 1, "num_hidden_layers": 2}
        )
    if family == "sliding":
        return transformers.MistralConfig(**common, sliding_window=2)
    if family == "moe":
        return transformers.MixtralConfig(**common, num_local_experts=4, num_experts_per_tok=2)
    if family == "hybrid":
        return transformers.Lfm2Config(**{**common, "num_hidden_layers": 2}, layer_types=["conv", "full_attention"])
    raise ValueError(f"family: expected one of {', '.join(FAMILIES)}, got {family!r}")


def tiny_model(family: str, vocab: int = 16, seed: int = 0, hidden: int = 16, head_dim: int | None = None) -> Any:
    """A random-weight causal LM of ``family`` (``FAMILIES``), float32, in eval mode; the
    same arguments give the same weights on every machine's CPU. ``head_dim``: the attention
    heads' size when it is not hidden / heads (vLLM's CPU attention needs 32 or more)."""
    if not 2 <= vocab <= 4096:
        raise ValueError(f"vocab: expected 2 to 4096 words, got {vocab}")
    config = _config(family, vocab, hidden, head_dim)
    config._attn_implementation = "eager"
    if isinstance(getattr(config, "rope_parameters", None), dict):
        config.rope_parameters["rope_theta"] = ROPE_THETA
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                p.mul_(QK_SCALE)
    return model.eval()


def scripted_drafter(vocab: int, script: Sequence[int]) -> Any:
    """A one-layer Llama that proposes ``script[t]`` after token t, whatever came before:
    its attention and MLP write nothing (zero output projections), so the last hidden state
    is the normalised embedding of the last token, one-hot at t, and the head maps it to a
    logit margin of ``SCRIPT_LOGIT`` for ``script[t]``."""
    if len(script) != vocab or not all(0 <= s < vocab for s in script):
        raise ValueError(f"script: expected {vocab} token ids in [0, {vocab}), one per token, got {list(script)}")
    config = _config("llama", vocab, vocab)
    config._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.model.embed_tokens.weight.copy_(torch.eye(vocab))
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
        head = torch.zeros(vocab, vocab)
        for t, s in enumerate(script):
            head[s, t] = SCRIPT_LOGIT / vocab**0.5  # the normalised one-hot is sqrt(vocab) at t
        model.lm_head.weight.copy_(head)
    return model.eval()


def words(vocab: int) -> list[str]:
    """The tokenizer's words: id i is "w{i}"."""
    return [f"w{i}" for i in range(vocab)]


def word_tokenizer(vocab_words: Sequence[str]) -> Tokenizer:
    """A ``tokenizers`` word-level tokenizer over ``vocab_words`` (id = position), split on
    whitespace, the last word standing for unknown words."""
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab_words)}, unk_token=vocab_words[-1]))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tok


def save_checkpoint(model: Any, folder: str, vocab_words: Sequence[str] | None = None) -> str:
    """Write ``model`` as a checkpoint folder a user would point an engine at: config.json,
    model.safetensors, generation_config.json, and a word-level tokenizer (tokenizer.json,
    tokenizer_config.json) over ``vocab_words`` (default ``words(vocab)``)."""
    os.makedirs(folder, exist_ok=True)
    model.save_pretrained(folder)
    vocab_words = list(vocab_words or words(model.config.vocab_size))
    word_tokenizer(vocab_words).save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": vocab_words[-1]}, f)
    return folder


def save_eagle_head(folder: str, vocab: int, seed: int, hidden: int = 16, head_dim: int | None = None) -> str:
    """Write a random EAGLE-1 draft head as a checkpoint folder (config ``architectures``
    ``EagleLlamaForCausalLM``, the layout of the published EAGLE heads): ``fc`` maps the
    token's embedding and the target's last hidden state (2 x ``hidden``) to ``hidden``, then
    one Llama decoder layer without its input norm (EAGLE's); the embedding is its own, the
    head (``lm_head``) the target's."""
    import safetensors.torch

    layer = tiny_model("llama", vocab, seed, hidden=hidden, head_dim=head_dim)
    config = layer.config
    config.architectures = ["EagleLlamaForCausalLM"]
    weights = {
        k.removeprefix("model."): v
        for k, v in layer.state_dict().items()
        if k.startswith("model.layers.0.") and "input_layernorm" not in k
    }
    weights["embed_tokens.weight"] = layer.model.embed_tokens.weight.detach()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        weights["fc.weight"] = torch.randn(hidden, 2 * hidden) * INIT_RANGE
    os.makedirs(folder, exist_ok=True)
    config.save_pretrained(folder)
    safetensors.torch.save_file(
        {k: v.contiguous() for k, v in weights.items()}, os.path.join(folder, "model.safetensors")
    )
    return folder
