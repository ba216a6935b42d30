"""llama-cpp-python 0.3.16: with a draft model, generation crashes once the prompt plus the
generated tokens pass ``n_batch``.

``Llama(draft_model=...)`` forces logits for every position (``self._logits_all = True``),
but the array they are written to, ``self.scores``, was sized from the ``logits_all``
argument (False by default): ``n_batch`` rows instead of ``n_ctx``. ``eval`` then writes
rows past ``n_batch`` into an empty slice: "ValueError: could not broadcast input array from
shape (...) into shape (0,)". With the default ``n_batch`` of 512 any speculative generation
that reaches 512 tokens of context fails; ``logits_all=True`` avoids it.

A tiny random GGUF model (llama architecture, float32, vocabulary 16, written with the
``gguf`` package), ``n_batch=16``, prompt lookup with 2 draft tokens, a prompt of 20 tokens:
the script prints what ``generate`` does without a draft model, with one, and with one and
``logits_all=True``.

llama-cpp-python 0.3.16 (built from source, CPU): without a draft 4 tokens; with a draft
the ValueError; with a draft and logits_all=True the same 4 tokens as without.

Self-contained: llama_cpp, gguf, numpy and the standard library; no download.
"""

from __future__ import annotations

import os
import sys
import tempfile

import gguf
import numpy as np
from llama_cpp import Llama
from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

V, HIDDEN, HEADS, HEAD_DIM = 16, 32, 2, 16
PROMPT = [4, 5, 6, 7, 8] * 4


def write_model(path: str) -> None:
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(128)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(1)
    w.add_feed_forward_length(2 * HIDDEN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(HEADS)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10.0)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_file_type(0)
    w.add_vocab_size(V)
    w.add_tokenizer_model("llama")
    w.add_token_list(["<unk>", "<s>", "</s>", "<0x0A>"] + [f"w{i}" for i in range(4, V)])
    w.add_token_scores([0.0] * V)
    w.add_token_types([2, 3, 3, 6] + [1] * (V - 4))
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    ones = np.ones(HIDDEN, np.float32)
    shapes = {
        "token_embd.weight": (V, HIDDEN),
        "output.weight": (V, HIDDEN),
        "blk.0.attn_q.weight": (HIDDEN, HIDDEN),
        "blk.0.attn_k.weight": (HIDDEN, HIDDEN),
        "blk.0.attn_v.weight": (HIDDEN, HIDDEN),
        "blk.0.attn_output.weight": (HIDDEN, HIDDEN),
        "blk.0.ffn_gate.weight": (2 * HIDDEN, HIDDEN),
        "blk.0.ffn_up.weight": (2 * HIDDEN, HIDDEN),
        "blk.0.ffn_down.weight": (HIDDEN, 2 * HIDDEN),
    }
    for name, shape in shapes.items():
        w.add_tensor(name, (0.3 * rng.standard_normal(shape)).astype(np.float32))
    for name in ("output_norm.weight", "blk.0.attn_norm.weight", "blk.0.ffn_norm.weight"):
        w.add_tensor(name, ones)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def run(path: str, **kwargs: object) -> str:
    llm = Llama(model_path=path, n_ctx=128, n_batch=16, n_ubatch=16, n_threads=1, seed=0, verbose=False, **kwargs)
    tokens = []
    try:
        for t in llm.generate(PROMPT, temp=0.0):
            tokens.append(int(t))
            if len(tokens) == 4:
                break
    except Exception as e:  # the defect
        return f"{type(e).__name__}: {e}"
    return str(tokens)


def main() -> int:
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "tiny.gguf")
    write_model(path)
    draft = {"draft_model": LlamaPromptLookupDecoding(num_pred_tokens=2)}
    print(f"llama-cpp-python, tiny GGUF Llama (vocabulary {V}), n_batch=16, prompt of {len(PROMPT)} tokens, greedy")
    plain = run(path)
    crashed = run(path, **draft)
    fixed = run(path, **draft, logits_all=True)
    print(f"  without a draft model:                 {plain}")
    print(f"  prompt lookup (2 drafts):              {crashed}")
    print(f"  prompt lookup, logits_all=True:        {fixed}")
    if crashed.startswith("ValueError") and fixed == plain:
        print("REPRODUCED: a draft model crashes generation past n_batch tokens unless logits_all=True")
    else:
        print("not reproduced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
