"""transformers 5.24: assisted generation and prompt lookup with a reused prompt cache encode
the whole prompt again on top of the cache, and sample another law.

A user who keeps a prompt's cache and hands a copy to ``generate`` (``cache=``, "re-use a
prompt cache") gets the right law from plain sampling: ``generate`` encodes only the
prompt tokens the cache lacks. With ``prompt_lookup_num_tokens`` (or ``assistant_model``)
the first verification forward receives every prompt token plus the drafts, so the cache
then holds the prompt twice and every later token attends to the duplicate.

A tiny random Llama (vocabulary 8, one layer, RoPE theta 10 and query/key weights x3 so that
what a token attends to shows in its law), the prompt [1, 2, 3, 4, 5] x 3, a cache of
its first 12 tokens. The script prints the tokens each target forward receives, then the
law of the first generated token (T = 1, no filter) measured with prompt lookup and the
reused cache, against the exact law from one full forward, with a chi-square test; and the
same for plain sampling with the same cache (the control, which agrees).

transformers 5.24.0 (CPU), N = 2000, 10 s: prompt lookup with the cache, chi2 = 747.2 on 7
df, p = 4.5e-157 (its first forward receives 17 tokens on a cache of 12); plain sampling
with the same cache, chi2 = 5.1, p = 0.64 (3 tokens on a cache of 12).

Self-contained: transformers, torch and the standard library; no download. The sample
count is the first argument or REPRO_SAMPLES.
"""

from __future__ import annotations

import copy
import os
import sys

import torch
import transformers

PROMPT = [1, 2, 3, 4, 5] * 3
CACHED = 12  # the prompt tokens the reused cache holds


def tiny_llama() -> transformers.LlamaForCausalLM:
    config = transformers.LlamaConfig(
        vocab_size=8,
        hidden_size=16,
        intermediate_size=32,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_hidden_layers=1,
        max_position_embeddings=128,
        initializer_range=0.3,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=0,
    )
    config.rope_parameters["rope_theta"] = 10.0  # positions a few tokens apart rotate far apart
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # sharper attention, so that what a token attends to shows in its law
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(3.0)
            layer.self_attn.k_proj.weight.mul_(3.0)
    return model


def chi_square(counts: list[int], law: list[float]) -> tuple[float, int, float]:
    n = sum(counts)
    cells = [(c, n * p) for c, p in zip(counts, law) if p > 0]
    stat = sum((c - e) ** 2 / e for c, e in cells)
    stat += float("inf") if any(c > 0 for c, p in zip(counts, law) if p == 0) else 0.0
    df = len(cells) - 1
    p = float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64), torch.tensor(stat / 2)))
    return stat, df, p


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("REPRO_SAMPLES", "2000"))
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    model = tiny_llama()
    prompt = torch.tensor([PROMPT])
    with torch.no_grad():
        law = torch.softmax(model(prompt, use_cache=False).logits[0, -1].double(), -1).tolist()
        cache = transformers.DynamicCache(config=model.config)
        model(prompt[:, :CACHED], cache=cache, use_cache=True)

    seen: list[tuple[int, int]] = []  # (tokens in, cache length before) of each target forward

    def hook(module, args, kwargs):
        ids, c = kwargs.get("input_ids"), kwargs.get("cache") or kwargs.get("past_key_values")
        seen.append((ids.shape[1], c.get_seq_length() if c is not None else 0))

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    print(f"transformers {transformers.__version__}, tiny Llama (vocabulary 8), prompt {PROMPT}")
    print(f"a reused prompt cache of its first {CACHED} tokens; T = 1, no filter; {n} runs, seed 0..{n - 1}")
    worst = 1.0
    for label, extra in (("prompt lookup (2 drafts)", {"prompt_lookup_num_tokens": 2}), ("plain sampling", {})):
        counts = [0] * len(law)
        seen.clear()
        with torch.no_grad():
            for seed in range(n):
                torch.manual_seed(seed)
                out = model.generate(
                    prompt,
                    attention_mask=torch.ones_like(prompt),
                    cache=copy.deepcopy(cache),
                    do_sample=True,
                    top_k=0,
                    max_new_tokens=2,
                    **extra,
                )
                counts[int(out[0, len(PROMPT)])] += 1
        first = seen[0]
        print(f"\n{label}: the first target forward received {first[0]} tokens on a cache of {first[1]}")
        print(" token  measured  target")
        for t, (c, p) in enumerate(zip(counts, law)):
            print(f"{t:>6}  {c / n:8.4f}  {p:6.4f}")
        stat, df, p = chi_square(counts, law)
        print(f"chi-square against the target law: chi2 = {stat:.1f} on {df} df, p = {p:.3g}, N = {n}")
        if label.startswith("prompt"):
            worst = p
    handle.remove()
    if worst < 1e-6:
        print("\nREPRODUCED: prompt lookup with a reused prompt cache does not sample the target law")
    else:
        print("\nnot reproduced: prompt lookup with a reused prompt cache samples the target law here")
    return 0


if __name__ == "__main__":
    sys.exit(main())
