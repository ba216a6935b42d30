"""transformers: the Gemma-4 assistant path (SinglePositionMultiTokenCandidateGenerator)
drafts the argmax of the assistant's logits but hands those logits to
``_speculative_sampling`` as the law the draft was sampled from, so ``generate(do_sample=True)``
with a Gemma-4 assistant does not sample from the target's law.

Self-contained: transformers, torch and the standard library only; no download. A tiny
Gemma4ForCausalLM and Gemma4AssistantForCausalLM (2 layers, hidden size 16, vocabulary 8),
their ``lm_head`` weights set to zero by hand: every next-token law of both models is
uniform (1/8 each). The assistant's argmax is token 0 (torch.argmax: first of the ties); its
reported q(0) = 1/8 = p(0), so the draft is always accepted and the second new token (the
first drafted one) is always 0, where the target's law is uniform. A sampled draft would be
exact here (q = p).

    python examples/upstream/transformers_gemma4_greedy_draft.py [N]   (default N = 300; or REPRO_SAMPLES=N)
"""

import math
import os
import sys

import torch
from transformers import Gemma4ForCausalLM, Gemma4TextConfig
from transformers.models.gemma4_assistant import Gemma4AssistantConfig, Gemma4AssistantForCausalLM

V = 8


def chi_square(counts: list[int], law: list[float]) -> tuple[float, int, float]:
    """Pearson's statistic, its degrees of freedom and p-value (torch's regularized upper
    incomplete gamma)."""
    n = sum(counts)
    stat = sum((c - n * q) ** 2 / (n * q) for c, q in zip(counts, law) if q > 0)
    df = len([q for q in law if q > 0]) - 1
    half = torch.tensor([df / 2, stat / 2], dtype=torch.float64)
    p = float(torch.special.gammaincc(half[0], half[1]))
    return stat, df, p


def models() -> tuple[Gemma4ForCausalLM, Gemma4AssistantForCausalLM]:
    torch.manual_seed(0)  # the other weights: the heads are zero, so they do not change any law
    text = dict(
        vocab_size=V, hidden_size=16, intermediate_size=16, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=8, global_head_dim=8, layer_types=["sliding_attention", "full_attention"],
        sliding_window=16, num_kv_shared_layers=0, hidden_size_per_layer_input=0, vocab_size_per_layer_input=0,
        pad_token_id=7, bos_token_id=6, eos_token_id=None, tie_word_embeddings=False,
    )  # fmt: skip
    target = Gemma4ForCausalLM(Gemma4TextConfig(**text)).eval()
    assistant = Gemma4AssistantForCausalLM(Gemma4AssistantConfig(text_config=text, backbone_hidden_size=16)).eval()
    with torch.no_grad():
        target.lm_head.weight.zero_()
        assistant.lm_head.weight.zero_()
    assistant.generation_config.num_assistant_tokens = 1
    assistant.generation_config.num_assistant_tokens_schedule = "constant"
    return target, assistant


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("REPRO_SAMPLES", "300"))
    torch.set_num_threads(1)
    target, assistant = models()
    prompt = torch.tensor([[6, 3]])
    with torch.no_grad():
        law = target(prompt).logits[0, -1].softmax(-1).tolist()  # the target's law (uniform: its head is zero)
    counts = [0] * V
    torch.manual_seed(0)
    for _ in range(n):
        out = target.generate(prompt, assistant_model=assistant, do_sample=True, top_k=0, max_new_tokens=3)
        counts[int(out[0, 3])] += 1  # the first iteration only prefills; the next token is the drafted one
    print(f"transformers generate, Gemma-4 assistant, do_sample=True, {n} runs, seed 0")
    print("the target's law of the second new token is uniform; with its reported logits a sampled draft is exact")
    print(f"{'token':>6} {'measured':>9} {'target':>7}")
    for t in range(V):
        print(f"{t:>6} {counts[t] / n:9.4f} {law[t]:7.4f}")
    stat, df, p = chi_square(counts, law)
    print(f"chi-square against the target law: chi2 = {stat:.1f} on {df} df, p = {p:.3g}, N = {n}")
    assert math.isclose(sum(law), 1.0, rel_tol=1e-6)


if __name__ == "__main__":
    main()
