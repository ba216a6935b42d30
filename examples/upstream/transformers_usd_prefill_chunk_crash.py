"""transformers: universal speculative decoding crashes with ``prefill_chunk_size``:
``generate(assistant_model=..., tokenizer=..., assistant_tokenizer=..., prefill_chunk_size=k)``
raises a tensor-size mismatch in its first step, while assisted generation with one tokenizer
and prompt lookup take the same setting.

Self-contained: transformers, torch, tokenizers and the standard library only; no download.
Two tiny LlamaForCausalLM models (hand-set bigram tables, as in
transformers_usd_pruned_logits.py), the assistant's vocabulary the target's words in another
order plus one of its own; two real fast tokenizers loaded with AutoTokenizer; a prompt of 6
tokens prefilled 2 at a time. Prints the exception and the traceback line where it is raised,
then the same call without ``prefill_chunk_size`` (it runs); exits 0 when the crash
reproduces, 1 when it does not.

    python examples/upstream/transformers_usd_prefill_chunk_crash.py
"""

import json
import math
import os
import sys
import tempfile
import traceback

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

WORDS = ["<s>", "w0", "w1", "w2", "w3"]


def bigram_llama(V: int, law: list[float]) -> LlamaForCausalLM:
    """A LlamaForCausalLM of vocabulary V whose next-token logits are log(law) after any token."""
    d = 8
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
        model.model.embed_tokens.weight[torch.arange(V), torch.arange(V)] = 1.0
        logits = torch.tensor([math.log(q) if q > 0 else -30.0 for q in law])
        model.lm_head.weight[:] = (logits / math.sqrt(d))[:, None]
    return model


def real_tokenizer(words: list[str]):
    folder = tempfile.mkdtemp()
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=words[0]))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast"}, f)
    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


def main() -> int:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    target = bigram_llama(len(WORDS), [0.0, 0.25, 0.25, 0.25, 0.25])
    assistant = bigram_llama(len(WORDS) + 1, [0.0, 0.3, 0.3, 0.2, 0.1, 0.1])
    assistant.generation_config.num_assistant_tokens = 2
    assistant.generation_config.num_assistant_tokens_schedule = "constant"
    tokenizer = real_tokenizer(WORDS)
    assistant_tokenizer = real_tokenizer([WORDS[0], *reversed(WORDS[1:]), "extra"])
    prompt = torch.tensor([[0, 1, 2, 3, 4, 1]])
    kwargs = dict(
        assistant_model=assistant, tokenizer=tokenizer, assistant_tokenizer=assistant_tokenizer,
        do_sample=True, top_k=0, max_new_tokens=3, attention_mask=torch.ones_like(prompt),
    )  # fmt: skip
    print("transformers generate, universal speculative decoding, do_sample=True, prompt of 6 tokens")
    try:
        target.generate(prompt, prefill_chunk_size=2, **kwargs)
    except Exception as error:
        frame = traceback.extract_tb(error.__traceback__)[-1]
        print(f"with prefill_chunk_size=2: CRASH: {type(error).__name__}: {error}")
        print(f"raised at {os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}: {frame.line}")
        out = target.generate(prompt, **kwargs)
        print(f"without it: {out[0, prompt.shape[1] :].tolist()} (runs)")
        return 0
    print("no crash: the defect did not reproduce")
    return 1


if __name__ == "__main__":
    sys.exit(main())
