"""vLLM (V1 model runner): under speculative decoding the BONUS token keeps the end-of-sequence
ids masked by ``min_tokens`` as long as the request had fewer than ``min_tokens`` output
tokens at the start of the step, although the bonus token comes after the step's accepted
draft tokens. So ``min_tokens`` is enforced one or more positions too long, and the output
law is not the non-speculative one.

Where: ``RejectionSampler.apply_logits_processors`` masks the draft positions one by one
(``MinTokensLogitsProcessor.apply_with_spec_decode``: position j is masked while
len(output) + j < min_tokens), but the bonus token is sampled by ``Sampler.forward(...,
predict_bonus_token=True)``, whose ``apply_logits_processors`` calls
``MinTokensLogitsProcessor.apply``: that masks every request still in its state, i.e. with
len(output) < min_tokens, whatever the number of draft tokens before the bonus position.
(The V2 model runner's own kernel, ``vllm/v1/worker/gpu/sample/logit_bias.py``, masks per
position, ``pos + 1 < min_len``.)

The request: vocabulary 3, end-of-sequence id 2, ``min_tokens=1``, temperature 1, prompt
[0], no output yet; one draft token, 0, given without draft probabilities (vLLM's ngram
path, ``draft_probs=None``); the target's logits are 0 everywhere, so every law is uniform
over the tokens not masked. The first token may not be 2: the draft 0 is accepted with
probability 1/2, else the recovered token is 1. After an accepted 0 the request has one
output token, min_tokens is reached, and the bonus token is uniform over {0, 1, 2}, as
vLLM's own sampler gives it without speculation (printed). Exact law of the step's output:
(0, 0), (0, 1), (0, 2) each 1/6, (1,) 1/2. vLLM never emits (0, 2).

Self-contained: vLLM, torch and the standard library; no model, no download. On vLLM's CPU
build the rejection sampler's Triton kernels run under Triton's interpreter
(TRITON_INTERPRET=1, set below; vLLM's placeholders are swapped for the real triton
modules while ``vllm.v1.sample.rejection_sampler`` is imported). N requests are verified in
one ``RejectionSampler.forward``.

    python examples/upstream/vllm_min_tokens_bonus.py [N]   (default N = 600; or REPRO_SAMPLES=N)
"""

import importlib
import os
import sys
import warnings

os.environ.setdefault("TRITON_INTERPRET", "1")  # read when triton is first imported (CPU build)
warnings.simplefilter("ignore")  # vLLM's and torch's import-time deprecation notices

import torch  # noqa: E402

V, EOS, MIN_TOKENS, DRAFT = 3, 2, 1, 0
OUTCOMES = [(0, 0), (0, 1), (0, 2), (1,)]
LAW = [1 / 6, 1 / 6, 1 / 6, 1 / 2]


def chi_square(counts: list[int], law: list[float]) -> tuple[float, int, float]:
    """Pearson's statistic, its degrees of freedom and p-value (torch's regularized upper
    incomplete gamma)."""
    n = sum(counts)
    stat = sum((c - n * q) ** 2 / (n * q) for c, q in zip(counts, law) if q > 0)
    df = len([q for q in law if q > 0]) - 1
    half = torch.tensor([df / 2, stat / 2], dtype=torch.float64)
    return stat, df, float(torch.special.gammaincc(half[0], half[1]))


def rejection_sampler_module():
    """``vllm.v1.sample.rejection_sampler`` with real Triton kernels (interpreted on a CPU build)."""
    triton_utils = importlib.import_module("vllm.triton_utils")
    if triton_utils.HAS_TRITON:
        return importlib.import_module("vllm.v1.sample.rejection_sampler")
    importing = importlib.import_module("vllm.triton_utils.importing")
    importlib.import_module("vllm.v1.sample.sampler")  # the CPU build's sampler, placeholders in place
    saved = (triton_utils.HAS_TRITON, triton_utils.triton, triton_utils.tl, importing.HAS_TRITON)
    try:
        triton_utils.triton = importlib.import_module("triton")
        triton_utils.tl = importlib.import_module("triton.language")
        triton_utils.HAS_TRITON = importing.HAS_TRITON = True
        return importlib.import_module("vllm.v1.sample.rejection_sampler")
    finally:
        triton_utils.HAS_TRITON, triton_utils.triton, triton_utils.tl, importing.HAS_TRITON = saved


def metadata(n: int, outputs: list[list[int]], spec: list[list[int]]):
    """SamplingMetadata for n copies of the request, as InputBatch fills it, with the
    MinTokensLogitsProcessor a speculative engine has (build_logitsprocs), its state updated
    as InputBatch.refresh_metadata updates it."""
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.logits_processor.builtin import MinTokensLogitsProcessor
    from vllm.v1.sample.logits_processor.state import BatchUpdateBuilder
    from vllm.v1.sample.metadata import SamplingMetadata

    params = SamplingParams(temperature=1.0, min_tokens=MIN_TOKENS)
    params.update_from_generation_config({}, EOS)  # the engine adds the model's EOS to the stop ids
    proc = MinTokensLogitsProcessor(None, torch.device("cpu"), False)
    builder = BatchUpdateBuilder()
    builder.added.extend((i, params, [0], outputs[i]) for i in range(n))
    proc.update_state(builder.get_and_reset(n))
    return SamplingMetadata(
        temperature=torch.ones(n), all_greedy=False, all_random=True, top_p=None, top_k=None,
        generators={}, max_num_logprobs=None, no_penalties=True, prompt_token_ids=None,
        frequency_penalties=torch.zeros(n), presence_penalties=torch.zeros(n),
        repetition_penalties=torch.ones(n), output_token_ids=[], allowed_token_ids_mask=None,
        bad_words_token_ids={}, logitsprocs=LogitsProcessors([proc]), logprob_token_ids=None,
        spec_token_ids=spec, thinking_budget_state_holder=None,
    )  # fmt: skip


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("REPRO_SAMPLES", "600"))
    torch.set_num_threads(1)
    rs_mod = rejection_sampler_module()
    import vllm
    from vllm.v1.sample.sampler import Sampler
    from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

    # vLLM's own non-speculative law of the second token, after the output [0]
    after = Sampler().apply_logits_processors(torch.zeros(1, V), metadata(1, [[DRAFT]], [[]]), False)
    plain = after.softmax(-1)[0].tolist()
    print(f"vLLM {vllm.__version__}, RejectionSampler (V1 model runner), {n} requests, seed 0")
    print(f"min_tokens={MIN_TOKENS}, eos {EOS}, prompt [0], no output yet, one draft token {DRAFT} (draft_probs=None)")
    print("vLLM's sampler without speculation, second token after the output [0]:", " ".join(f"{q:.4f}" for q in plain))

    sampler = Sampler()
    tk = sampler.topk_topp_sampler
    tk.forward = tk.forward_native  # the exponential race; forward_cpu (x86/ARM) masks the same logits
    rs = rs_mod.RejectionSampler(sampler)
    cu = torch.arange(1, n + 1, dtype=torch.int32)
    spec = SpecDecodeMetadata(
        draft_token_ids=torch.full((n,), DRAFT, dtype=torch.int32), num_draft_tokens=[1] * n,
        cu_num_draft_tokens=cu, cu_num_sampled_tokens=2 * cu,
        target_logits_indices=torch.arange(0, 2 * n, 2, dtype=torch.int32),
        bonus_logits_indices=torch.arange(1, 2 * n, 2, dtype=torch.int32),
        logits_indices=torch.arange(2 * n, dtype=torch.int32),
    )  # fmt: skip
    torch.manual_seed(0)
    md = metadata(n, [[] for _ in range(n)], [[DRAFT] for _ in range(n)])
    out = rs(spec, None, torch.zeros(2 * n, V), md)
    tokens, _ = rs_mod.RejectionSampler.parse_output(out.sampled_token_ids, V)
    counts = [sum(1 for t in tokens if tuple(t) == o) for o in OUTCOMES]
    assert sum(counts) == n, "an outcome outside the four"
    print(f"{'output':>8} {'measured':>9} {'exact':>7}")
    for o, c, q in zip(OUTCOMES, counts, LAW):
        print(f"{','.join(map(str, o)):>8} {c / n:9.4f} {q:7.4f}")
    stat, df, p = chi_square(counts, LAW)
    print(f"chi-square against the target law: chi2 = {stat:.1f} on {df} df, p = {p:.3g}, N = {n}")


if __name__ == "__main__":
    main()
