"""transformers: universal speculative decoding crashes when every assistant word is a
target word (nothing to prune, e.g. one tokenizer and a target vocabulary padded to a larger
size): ``AssistantToTargetTranslator.get_target_ids`` reads ``assistant_overlap_token_ids``,
which only the pruning sets.

Self-contained: transformers, torch, tokenizers and the standard library only; no download.
Two tiny LlamaForCausalLM models (hand-set bigram tables, as in
transformers_usd_pruned_logits.py), the target's vocabulary one padding slot larger, so
``generate`` takes both tokenizers; two real fast tokenizers over the same words (the
assistant's in another id order), loaded with AutoTokenizer. Prints the exception and the
traceback line where it is raised; exits 0 when the crash reproduces, 1 when it does not.

    python examples/upstream/transformers_usd_subset_vocab_crash.py
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
    target = bigram_llama(len(WORDS) + 1, [0.0, 0.25, 0.25, 0.25, 0.25, 0.0])  # one padding slot
    assistant = bigram_llama(len(WORDS), [0.0, 0.4, 0.3, 0.2, 0.1])
    assistant.generation_config.num_assistant_tokens = 1
    assistant.generation_config.num_assistant_tokens_schedule = "constant"
    tokenizer = real_tokenizer(WORDS)
    assistant_tokenizer = real_tokenizer([WORDS[0], *reversed(WORDS[1:])])
    try:
        target.generate(
            torch.tensor([[0]]), assistant_model=assistant, tokenizer=tokenizer,
            assistant_tokenizer=assistant_tokenizer, do_sample=True, top_k=0, max_new_tokens=2,
        )  # fmt: skip
    except Exception as error:
        frame = traceback.extract_tb(error.__traceback__)[-1]
        print(
            "transformers generate, universal speculative decoding, do_sample=True, assistant words inside the target's"
        )
        print(f"CRASH: {type(error).__name__}: {error}")
        print(f"raised at {os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}: {frame.line}")
        return 0
    print("no crash: the defect did not reproduce")
    return 1


if __name__ == "__main__":
    sys.exit(main())
