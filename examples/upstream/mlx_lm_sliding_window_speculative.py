"""mlx-lm 0.32: speculative decoding on a model with a sliding-window layer returns other
tokens than the same model without speculation, even greedily.

A tiny random Llama (``mlx_lm.models.llama``, vocabulary 16, hidden 16, a sliding-window
layer of 2 tokens and a full-attention layer) and a second one of the same shape as the
draft. Greedy decoding of 4 tokens after [1, 2, 3]: ``generate_step`` (no draft) against
``speculative_generate_step`` with 2 draft tokens. Greedy speculative decoding must return
exactly the greedy tokens; here it does not. The same script with a full-attention layer in
place of the sliding one (``--full``) agrees.

mlx-lm 0.32.2, mlx 0.32.4 (CPU): plain [2, 7, 2, 5], speculative [2, 14, 14, 9].

Self-contained: mlx, mlx_lm, numpy and the standard library; no download.
"""

from __future__ import annotations

import sys

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten
from mlx_lm.generate import generate_step, speculative_generate_step
from mlx_lm.models.llama import Model, ModelArgs
from mlx_lm.sample_utils import make_sampler


def model(seed: int, full: bool) -> Model:
    args = ModelArgs(
        model_type="llama",
        hidden_size=16,
        num_hidden_layers=2,
        intermediate_size=32,
        num_attention_heads=2,
        num_key_value_heads=2,
        rms_norm_eps=1e-6,
        vocab_size=16,
        rope_theta=10.0,
        tie_word_embeddings=False,
        sliding_window=2,
        layer_types=["full_attention" if full else "sliding_attention", "full_attention"],
    )
    m = Model(args)
    rng = np.random.default_rng(seed)
    weights = []
    for name, value in sorted(tree_flatten(m.parameters())):
        w = np.ones(value.shape) if name.endswith("norm.weight") else 0.3 * rng.standard_normal(value.shape)
        if name.endswith(("q_proj.weight", "k_proj.weight")):
            w *= 3.0
        weights.append((name, mx.array(w.astype(np.float32))))
    m.load_weights(weights)
    return m


def main() -> int:
    full = "--full" in sys.argv
    target, draft = model(0, full), model(1, full)
    prompt = mx.array([1, 2, 3], dtype=mx.uint32)
    greedy = make_sampler(temp=0.0)
    plain = [int(t) for t, _ in generate_step(prompt, target, max_tokens=4, sampler=greedy)]
    spec = [
        int(t)
        for t, _, _ in speculative_generate_step(
            prompt, target, draft, num_draft_tokens=2, sampler=greedy, max_tokens=4
        )
    ]
    layer = "full-attention" if full else "sliding-window (2)"
    print(f"mlx-lm, tiny Llama with a {layer} layer, greedy, prompt [1, 2, 3]")
    print(f"  without speculation: {plain}")
    print(f"  speculative (2 drafts): {spec}")
    print("  the same" if plain == spec else "  DIFFERENT: greedy speculative decoding must return the greedy tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
