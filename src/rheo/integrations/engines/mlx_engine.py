"""mlx-lm's own speculative decoding, end to end, on tiny real models (``mlx[cpu]`` and
``mlx-lm``; ``.ci/engines`` installs them in a venv of their own, without torch).

``mlx_lm.generate.speculative_generate_step(prompt, model, draft_model,
num_draft_tokens=L, sampler=make_sampler(temp=T, top_k=k), max_tokens=n)`` on
``mlx_lm.models.llama.Model`` built from ``ModelArgs`` with random weights drawn here (numpy,
seeded; the same scales as ``rheo.testing.engine_models``: initializer range 0.3, query and
key projections x3, RoPE theta 10). mlx-lm samples the target at every draft position and
keeps the drafts up to the first mismatch (no draft law), one request at a time, seeded by
``mx.random.seed``.

Families (``FAMILIES``): ``llama``, ``gqa`` (4 query heads, 1 key/value head, 2 layers),
``sliding`` (a sliding-window layer of 2, then a full one: mlx-lm wants one full layer).
Methods: ``speculative`` (a draft model of the same family, another seed). The reference is
the same model's full forward per prefix (no cache) through the sampler's law:
softmax(logits / T) over the top-k tokens (mlx-lm's ``apply_top_k`` keeps the k largest);
top-p is not mirrored here and refused.

Case settings (``EngineCase.extra``, ``EXTRAS``): ``prefill_chunk`` k prefills the prompt k
tokens a step (``prefill_step_size=k``); ``prefix_cache`` hands ``speculative_generate_step``
the target's and the draft's caches over the prompt but its last ``PROMPT_TAIL`` tokens
(``prompt_cache=``, a fresh copy per request) and the rest of the prompt. mlx-lm refuses a
rotating (sliding-window) prompt cache for speculative decoding, so ``sliding`` does not
take it. ``repetition_penalty`` r is ``logits_processors=make_logits_processors(
repetition_penalty=r)``: CTRL's penalty on the last 20 tokens (plain ``generate_step``
counts the prompt and the output), which the reference applies to the raw logits
(``base.penalise``) before the sampler's law. Method ``plain`` (``generate_step``, no draft)
checks that the reference is mlx-lm's own law.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from rheo.integrations.engines.base import EngineCase, penalise, sequence_law

METHODS = ("speculative",)
EXTRAS = ("prefix_cache", "prefill_chunk", "repetition_penalty")  # the EngineCase.extra settings it honours
PENALTY_WINDOW = 20  # make_logits_processors' repetition_context_size, its default
PLAIN = "plain"  # generate_step without a draft model: the check that the reference is mlx-lm's own law
PROMPT_TAIL = 3  # prefix_cache: the prompt's last tokens that speculative_generate_step still encodes
FAMILIES = ("llama", "gqa", "sliding")
TARGET_SEED, DRAFT_SEED = 0, 1
HIDDEN = 16


def _args(family: str, vocab: int) -> dict[str, Any]:
    args: dict[str, Any] = {
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "num_hidden_layers": 1,
        "intermediate_size": 2 * HIDDEN,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab,
        "rope_theta": 10.0,
        "tie_word_embeddings": False,
    }
    if family == "gqa":
        args |= {"num_attention_heads": 4, "num_key_value_heads": 1, "num_hidden_layers": 2}
    if family == "sliding":
        args |= {"sliding_window": 2, "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"]}
    return args


def tiny_mlx_model(family: str, vocab: int, seed: int) -> Any:
    """A random-weight ``mlx_lm.models.llama.Model`` (float32)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models.llama import Model, ModelArgs

    model = Model(ModelArgs(**_args(family, vocab)))
    rng = np.random.default_rng(seed)
    weights = []
    for name, value in sorted(tree_flatten(model.parameters())):
        if name.endswith("norm.weight"):
            w = np.ones(value.shape)
        else:
            w = 0.3 * rng.standard_normal(value.shape)
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                w *= 3.0
        weights.append((name, mx.array(w.astype(np.float32))))
    model.load_weights(weights)
    mx.eval(model.parameters())
    return model


class MlxEngine:
    """The driver (``rheo.integrations.engines``)."""

    name = "mlx"
    methods = METHODS
    families = FAMILIES
    traceable = False  # mx.random's draws are not followed: judged statistically
    batches = False  # one request per speculative_generate_step
    top_p = False  # mlx-lm's top-p law is not mirrored by the reference
    seeds = False  # no per-request seed: mx.random.seed before each request
    needs_torch = False
    extras = EXTRAS

    def __init__(self) -> None:
        self._models: dict[tuple, Any] = {}
        self._laws: dict[tuple, np.ndarray] = {}

    def supports(self, case: EngineCase) -> str | None:
        if case.method not in METHODS + (PLAIN,):
            return f"method: expected one of {', '.join(METHODS)}, got {case.method!r}"
        if case.family not in FAMILIES:
            return f"family: expected one of {', '.join(FAMILIES)}, got {case.family!r}"
        if case.method == PLAIN and case.setting("prefix_cache"):
            return "prefix_cache: the driver builds a prompt cache for speculative generation only"
        if case.top_p is not None:
            return "top_p: mlx-lm's top-p law is not mirrored by this driver's reference"
        if case.drafter == "reject":
            return "drafter reject: the mlx driver drafts with a tiny model or the target's own weights"
        if case.other_prompt:
            return "mixed prompts: mlx-lm's speculative generation serves one request at a time"
        if case.setting("prefix_cache") and case.family == "sliding":
            return "prefix_cache on sliding: mlx-lm refuses a rotating prompt cache for speculative decoding"
        if case.setting("prefix_cache") and len(case.prompt) <= PROMPT_TAIL:
            return f"prefix_cache: the prompt needs more than {PROMPT_TAIL} tokens"
        return None

    def model(self, family: str, vocab: int, seed: int) -> Any:
        key = (family, vocab, seed)
        if key not in self._models:
            self._models[key] = tiny_mlx_model(family, vocab, seed)
        return self._models[key]

    def generate(self, case: EngineCase, seeds: Sequence[int | None]) -> list[tuple[int, ...]]:
        import mlx.core as mx
        from mlx_lm.generate import generate_step, speculative_generate_step
        from mlx_lm.sample_utils import make_logits_processors, make_sampler

        target = self.model(case.family, case.vocab, TARGET_SEED)
        draft = self.model(case.family, case.vocab, TARGET_SEED if case.drafter == "target" else DRAFT_SEED)
        sampler = make_sampler(temp=case.temperature, top_k=case.top_k or 0)
        settings: dict[str, Any] = {"max_tokens": case.n_tokens}
        if case.setting("prefill_chunk"):
            settings["prefill_step_size"] = int(case.setting("prefill_chunk"))
        if case.setting("repetition_penalty"):
            penalty = float(case.setting("repetition_penalty"))
            settings["logits_processors"] = make_logits_processors(repetition_penalty=penalty)
        prompt, cache = list(case.prompt), None
        if case.setting("prefix_cache"):
            cache, prompt = self.prompt_cache(case, target, draft), prompt[-PROMPT_TAIL:]
        out = []
        for seed in seeds:
            if seed is not None:
                mx.random.seed(int(seed))
            if cache is not None:
                settings["prompt_cache"] = copy.deepcopy(cache)
            if case.method == PLAIN:
                plain = generate_step(mx.array(prompt, dtype=mx.uint32), target, sampler=sampler, **settings)
                out.append(tuple(int(token) for token, _ in plain))
                continue
            steps = speculative_generate_step(
                mx.array(prompt, dtype=mx.uint32),
                target,
                draft,
                num_draft_tokens=case.draft_len,
                sampler=sampler,
                **settings,
            )
            out.append(tuple(int(token) for token, _, _ in steps))
        return out

    def prompt_cache(self, case: EngineCase, target: Any, draft: Any) -> list[Any]:
        """The target's then the draft's caches over the prompt but its last ``PROMPT_TAIL``
        tokens (mlx-lm's layout for ``speculative_generate_step``), built once."""
        key = ("prompt_cache", case.family, case.vocab, case.drafter, case.prompt)
        if key not in self._models:
            import mlx.core as mx
            from mlx_lm.models.cache import make_prompt_cache

            head = mx.array([list(case.prompt[:-PROMPT_TAIL])], dtype=mx.uint32)
            caches = []
            for model in (target, draft):
                cache = make_prompt_cache(model)
                mx.eval(model(head, cache=cache))
                caches += cache
            self._models[key] = caches
        return self._models[key]

    def next_law(self, case: EngineCase, prefix: tuple[int, ...]) -> np.ndarray:
        key = (case.family, case.vocab, case.temperature, case.top_k, case.extra, case.prompt + prefix)
        if key not in self._laws:
            import mlx.core as mx

            ids = mx.array([list(case.prompt + prefix)], dtype=mx.uint32)
            logits = np.array(self.model(case.family, case.vocab, TARGET_SEED)(ids)[0, -1], dtype=np.float64)
            if case.setting("repetition_penalty"):
                window = (case.prompt + prefix)[-PENALTY_WINDOW:]
                logits = penalise(logits, window, (), float(case.setting("repetition_penalty")))
            law = np.zeros(case.vocab)
            if case.temperature == 0:
                law[int(np.argmax(logits))] = 1.0
            else:
                z = logits / case.temperature
                if case.top_k:
                    z[np.argsort(-z, kind="stable")[case.top_k :]] = -np.inf
                law = np.exp(z - z.max())
                law /= law.sum()
            self._laws[key] = law
        return self._laws[key]

    def reference_law(self, case: EngineCase) -> dict[tuple[int, ...], float]:
        return sequence_law(case, self.next_law)
