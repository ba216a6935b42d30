"""mlx-lm 0.32: with a logits processor (a repetition penalty), speculative decoding samples
another law than the same model without speculation, because the processor is shown other
tokens.

``generate_step`` hands each logits processor the prompt and the tokens generated so far, so
``make_logits_processors(repetition_penalty=r)`` penalises the last 20 of those.
``speculative_generate_step`` keeps its own token list for the processors: it starts empty
(the prompt is never added) and collects what the draft model's steps and the target's
verification steps sample. A processor that only records what it is shown makes that
visible without any randomness: greedy, prompt [1, 2, ..., 8], 3 tokens, 2 drafts.

Then the law itself: a tiny random Llama (vocabulary 16) with ``repetition_penalty=3``, T = 1,
N seeded generations each way (``mx.random.seed(i)``), and a chi-squared test of homogeneity
between the two samples of the first generated token (scipy), where the prompt's tokens
other than its last lose their penalty.

Self-contained: mlx, mlx_lm, numpy, scipy and the standard library; no download.
"""

from __future__ import annotations

import sys
from collections import Counter

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten
from mlx_lm.generate import generate_step, speculative_generate_step
from mlx_lm.models.llama import Model, ModelArgs
from mlx_lm.sample_utils import make_logits_processors, make_sampler
from scipy.stats import chi2_contingency

PROMPT = [1, 2, 3, 4, 5, 6, 7, 8]


def model(seed: int) -> Model:
    args = ModelArgs(
        model_type="llama",
        hidden_size=16,
        num_hidden_layers=1,
        intermediate_size=32,
        num_attention_heads=2,
        num_key_value_heads=2,
        rms_norm_eps=1e-6,
        vocab_size=16,
        rope_theta=10.0,
        tie_word_embeddings=False,
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


def seen_contexts(target: Model, draft: Model) -> None:
    shown: list[list[int]] = []

    def record(tokens: mx.array, logits: mx.array) -> mx.array:
        shown.append([int(t) for t in np.array(tokens).reshape(-1)])
        return logits

    prompt = mx.array(PROMPT, dtype=mx.uint32)
    greedy = make_sampler(temp=0.0)
    out = [int(t) for t, _ in generate_step(prompt, target, max_tokens=3, sampler=greedy, logits_processors=[record])]
    print(f"generate_step (no draft), greedy tokens {out}; the processor was shown:")
    for s in shown:
        print(f"    {s}")
    shown.clear()
    steps = speculative_generate_step(
        prompt, target, draft, num_draft_tokens=2, sampler=greedy, max_tokens=3, logits_processors=[record]
    )
    out = [int(t) for t, _, _ in steps]
    print(f"speculative_generate_step (2 drafts), greedy tokens {out}; the processor was shown:")
    for s in shown:
        print(f"    {s}")


def sample(target: Model, draft: Model | None, n: int) -> Counter:
    prompt = mx.array(PROMPT, dtype=mx.uint32)
    sampler = make_sampler(temp=1.0)
    counts: Counter = Counter()
    for i in range(n):
        mx.random.seed(i)
        processors = make_logits_processors(repetition_penalty=3.0)
        if draft is None:
            steps = generate_step(prompt, target, max_tokens=1, sampler=sampler, logits_processors=processors)
            counts[int(next(steps)[0])] += 1
        else:
            steps2 = speculative_generate_step(
                prompt, target, draft, num_draft_tokens=2, sampler=sampler, max_tokens=1, logits_processors=processors
            )
            counts[int(next(steps2)[0])] += 1
    return counts


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
    target, draft = model(0), model(1)
    print(f"mlx-lm, tiny Llama (vocabulary 16), prompt {PROMPT}")
    seen_contexts(target, draft)
    plain, spec = sample(target, None, n), sample(target, draft, n)
    keys = sorted(set(plain) | set(spec))
    table = np.array([[plain[k] for k in keys], [spec[k] for k in keys]])
    table = table[:, table.sum(axis=0) >= 10]  # cells too small for the test dropped
    chi2, p, dof, _ = chi2_contingency(table)
    print(f"repetition_penalty=3, T = 1, the first token, N = {n} each: chi2 = {chi2:.1f} on {dof} df, p = {p:.3g}")
    if p < 1e-6:
        print("DIFFERENT: speculative decoding with a repetition penalty samples another law")
    else:
        print("the same law (no difference detected)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
