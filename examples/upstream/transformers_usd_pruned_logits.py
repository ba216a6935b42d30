"""transformers: universal speculative decoding places the pruned assistant logits on the
wrong target tokens unless the assistant tokenizer's ``get_vocab()`` lists its words in id
order (AssistantToTargetTranslator: the pruned ``lm_head`` rows follow
``target_to_assistant_input_ids.values()``, i.e. ``get_vocab()`` order, but
``get_target_logits`` writes them to ``_assistant_to_target_input_ids[mask]``, id order).

Self-contained: transformers, torch, tokenizers and the standard library only; no download.
Two tiny LlamaForCausalLM models whose next-token logits are hand-set tables (the layers
add nothing, the head reads the last token: a bigram table), and two real fast tokenizers
(tokenizers WordLevel models saved to a folder, loaded with AutoTokenizer). Every run of
``generate(do_sample=True)`` drafts one token; the first new token must follow the target's
law. Prints the measured law, the target's exact law, the law the defect predicts for the
vocabulary order this process got, and a chi-square test against the target's law.

    python examples/upstream/transformers_usd_pruned_logits.py [N]   (default N = 1000; or REPRO_SAMPLES=N)
"""

import json
import math
import os
import sys
import tempfile

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
from transformers.generation.candidate_generator import AssistantVocabTranslatorCache

ZERO = -30.0  # a logit of probability ~1e-13
TARGET_WORDS = ["<s>", "w0", "w1", "w2", "w3"]
ASSISTANT_WORDS = ["<s>", "w3", "w2", "w1", "w0", "extra"]  # the shared words in another id order, one of its own
TARGET_LAW = [0.0, 0.1, 0.2, 0.3, 0.4]  # after any token, over TARGET_WORDS
# after any token, over ASSISTANT_WORDS: every get_vocab() order but id order moves the first token's law by TV >= 0.1
ASSISTANT_LAW = [0.1, 0.0, 0.4, 0.3, 0.2, 0.0]


def bigram_llama(laws: list[list[float]]) -> LlamaForCausalLM:
    """A LlamaForCausalLM whose next-token logits after token t are log(laws[t])."""
    V, d = len(laws), 8
    config = LlamaConfig(
        vocab_size=V, hidden_size=d, intermediate_size=d, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, rms_norm_eps=1e-12, tie_word_embeddings=False, pad_token_id=0,
        bos_token_id=0, eos_token_id=None,
    )  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.model.norm.weight.fill_(1.0)
        model.model.embed_tokens.weight[torch.arange(V), torch.arange(V)] = 1.0  # one-hot; norm -> sqrt(d)
        for t, law in enumerate(laws):
            logits = torch.tensor([math.log(q) if q > 0 else ZERO for q in law])
            model.lm_head.weight[:, t] = logits / math.sqrt(d)
    return model


def real_tokenizer(words: list[str]):
    folder = tempfile.mkdtemp()
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=words[0]))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast"}, f)
    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


def chi_square(counts: list[int], law: list[float]) -> tuple[float, int, float]:
    """Pearson's statistic over the bins of positive probability, its degrees of freedom and
    p-value (torch's regularized upper incomplete gamma); a count in a bin of probability 0
    makes the statistic infinite."""
    n = sum(counts)
    if any(c > 0 and q == 0 for c, q in zip(counts, law)):
        return math.inf, len([q for q in law if q > 0]) - 1, 0.0
    stat = sum((c - n * q) ** 2 / (n * q) for c, q in zip(counts, law) if q > 0)
    df = len([q for q in law if q > 0]) - 1
    half = torch.tensor([df / 2, stat / 2], dtype=torch.float64)
    p = float(torch.special.gammaincc(half[0], half[1]))
    return stat, df, p


def predicted_law(p: list[float], q: list[float], reported: list[float]) -> list[float]:
    """The first token's law when a draft drawn from q is verified against ``reported``
    (transformers' _speculative_sampling: accept x with min(1, p(x)/reported(x)), else
    draw from (p - reported)+ normalized)."""
    accept = [qx * min(1.0, px / rx) if rx > 0 else qx for px, qx, rx in zip(p, q, reported)]
    residual = [max(0.0, px - rx) for px, rx in zip(p, reported)]
    total = sum(residual)
    return [a + (1 - sum(accept)) * (r / total if total > 0 else 0.0) for a, r in zip(accept, residual)]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("REPRO_SAMPLES", "1000"))
    torch.set_num_threads(1)
    target = bigram_llama([TARGET_LAW] * len(TARGET_WORDS))
    assistant = bigram_llama([ASSISTANT_LAW] * len(ASSISTANT_WORDS))
    assistant.generation_config.num_assistant_tokens = 1
    assistant.generation_config.num_assistant_tokens_schedule = "constant"
    tokenizer, assistant_tokenizer = real_tokenizer(TARGET_WORDS), real_tokenizer(ASSISTANT_WORDS)
    prompt = torch.tensor([[0]])
    counts = [0] * len(TARGET_WORDS)
    torch.manual_seed(0)
    for _ in range(n):
        out = target.generate(
            prompt, assistant_model=assistant, tokenizer=tokenizer, assistant_tokenizer=assistant_tokenizer,
            do_sample=True, temperature=1.0, top_k=0, max_new_tokens=2,
        )  # fmt: skip
        counts[int(out[0, 1])] += 1
    translator = AssistantVocabTranslatorCache._cache[tokenizer][assistant_tokenizer]
    order = translator.assistant_overlap_token_ids.tolist()  # the pruned head's rows: get_vocab() order
    # what get_target_logits reports: row k (word order[k]) written to the target id of assistant id k
    to_target = {a: TARGET_WORDS.index(w) for a, w in enumerate(ASSISTANT_WORDS) if w in TARGET_WORDS}
    q_true = [0.0] * len(TARGET_WORDS)
    reported = [0.0] * len(TARGET_WORDS)
    for k, a in enumerate(order):
        q_true[to_target[a]] = ASSISTANT_LAW[a]
        reported[to_target[k]] = ASSISTANT_LAW[a]
    total = sum(q_true)
    q_true, reported = [x / total for x in q_true], [x / total for x in reported]
    print(f"transformers generate, universal speculative decoding, do_sample=True, {n} runs, seed 0")
    print(
        f"assistant get_vocab() order of the shared words (assistant ids): {order}"
        f" ({'id order: no misplacement expected' if order == sorted(order) else 'NOT id order'})"
    )
    print(f"{'token':>6} {'measured':>9} {'target':>7} {'predicted by the defect':>24}")
    predicted = predicted_law(TARGET_LAW, q_true, reported)
    for t, w in enumerate(TARGET_WORDS):
        print(f"{w:>6} {counts[t] / n:9.4f} {TARGET_LAW[t]:7.4f} {predicted[t]:24.4f}")
    stat, df, p = chi_square(counts, TARGET_LAW)
    print(f"chi-square against the target law: chi2 = {stat:.1f} on {df} df, p = {p:.3g}, N = {n}")


if __name__ == "__main__":
    main()
