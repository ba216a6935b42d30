"""An EAGLE-1-style draft head for a Llama target, and its committed weights.

The head reads the target's top feature f_t (the last hidden state after the final norm,
the vector the target's ``lm_head`` turns into logits for token t+1) together with the
embedding of the token x_{t+1} that followed, and predicts the next feature:

    h_{t+1} = DecoderLayer(fc([embed(x_{t+1}) ; f_t]))       logits = lm_head(h_{t+1})

One Llama decoder layer with its own attention over the sequence of such pairs (its own
KV cache at generation time) and a linear ``fc`` from 2H to H; the embedding and
``lm_head`` are the target's, frozen. Drafting deeper than one token feeds the head's own
predicted feature back in place of f (EAGLE's feature-level autoregression); training adds
uniform noise to the true features to make that robust.

For SmolLM2-135M (H = 576) that is 4.2M trainable parameters; ``rheo train-draft`` trains
them and the package ships the result in fp16 (``weights/``).

Specification: docs/spec.md §1 (the draft law the head provides).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

WEIGHTS_DIR = Path(__file__).parent / "weights"
HEAD_FILE = "smollm2-135m-instruct-eagle.safetensors"
RECORD_FILE = "smollm2-135m-instruct-eagle.json"


class EagleHead(nn.Module):
    def __init__(self, config):
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

        super().__init__()
        cfg = config.__class__(**config.to_dict())
        cfg._attn_implementation = "sdpa"
        H = cfg.hidden_size
        self.fc = nn.Linear(2 * H, H, bias=True)
        self.layer = LlamaDecoderLayer(cfg, layer_idx=0)
        self.rotary = LlamaRotaryEmbedding(cfg)

    def forward(
        self,
        features: torch.Tensor,
        token_embeds: torch.Tensor,
        position_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        cache=None,
    ) -> torch.Tensor:
        """features, token_embeds [b, n, H]; position_ids [b, n]; attention_mask a boolean
        [b, 1, n, past + n] (True = attend); ``cache`` a transformers ``DynamicCache`` the
        new keys/values are appended to. Returns the predicted features [b, n, H]."""
        x = self.fc(torch.cat([token_embeds, features], -1))
        pos = self.rotary(x, position_ids)
        return self.layer(
            x,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=cache,
            use_cache=cache is not None,
            position_embeddings=pos,
        )

    def logits(self, lm_head: nn.Linear, h: torch.Tensor) -> torch.Tensor:
        """The draft's logits lm_head(h), with a bf16 copy of the target's frozen ``lm_head``
        weight (as in training, which runs under bf16 autocast). The draft law only has to
        be the law the tree is built from, any law keeps the output lossless, and this
        skinny matmul is memory-bound on a CPU: 4.6 ms instead of 21 ms for 10 rows here."""
        if getattr(self, "_w16_of", None) is not lm_head.weight:
            self._w16 = lm_head.weight.detach().to(torch.bfloat16)
            self._w16_of = lm_head.weight
        return nn.functional.linear(h.to(torch.bfloat16), self._w16).float()


def causal_mask(n: int, device=None) -> torch.Tensor:
    return torch.ones((n, n), dtype=torch.bool, device=device).tril().view(1, 1, n, n)


def save_head(head: EagleHead, record: dict, directory: Path = WEIGHTS_DIR) -> Path:
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    state = {
        k: v.detach().to(torch.float16).contiguous()
        for k, v in head.state_dict().items()
        if not k.startswith("rotary.")
    }
    save_file(state, str(directory / HEAD_FILE))
    (directory / RECORD_FILE).write_text(json.dumps(record, indent=1) + "\n")
    return directory / HEAD_FILE


def load_head(config, path: Path | None = None, dtype=torch.float32) -> EagleHead:
    """The committed head (or the one at ``path``) for the target's config."""
    from safetensors.torch import load_file

    path = Path(path) if path else WEIGHTS_DIR / HEAD_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no draft head at {path}; train one with: rheo train-draft")
    head = EagleHead(config)
    missing, unexpected = head.load_state_dict({k: v.to(dtype) for k, v in load_file(str(path)).items()}, strict=False)
    missing = [k for k in missing if not k.startswith("rotary.")]
    if missing or unexpected:
        raise ValueError(f"{path}: not a head for this target (missing {missing[:3]}, unexpected {unexpected[:3]})")
    head.to(dtype).eval()
    for p in head.parameters():
        p.requires_grad_(False)
    return head


def head_record(path: Path | None = None) -> dict:
    path = Path(path).with_suffix(".json") if path else WEIGHTS_DIR / RECORD_FILE
    return json.loads(path.read_text()) if path.is_file() else {}
