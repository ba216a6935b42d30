"""Whole generations of transformers' real ``model.generate`` (the protocol's ``generate``,
rheo.checks.protocol): one ``generate`` call runs every cycle of a generation of n_tokens
tokens, with the state transformers carries from cycle to cycle — the caches cropped to the
accepted prefix (``DynamicCache.crop`` in the assistant's and the MTP's ``_update_past_and_masks``
and ``mtp_cache.crop``), the number of draft tokens (``num_assistant_tokens_schedule``
"heuristic": +2 after a cycle that accepts every draft, -1 otherwise; "constant"), the
assistant's confidence threshold (``assistant_confidence_threshold``, updated by
scikit-learn's ``roc_curve`` in ``AssistedCandidateGenerator.update_candidate_strategy`` when
scikit-learn is installed, once more than 5 drafts were judged and both a match and a miss
were seen), and each cycle's root after its bonus or correction token.

Each class here is the single-cycle adapter of the same generator (``generators``), with
``generate`` instead of ``cycle`` (so it is judged on whole generations only): the same
table-backed models, the same prompt and root, ``max_length`` = root + n_tokens and no
stopping criterion but the length. Its paths are from the generation's start (the root), as
the protocol gives them; the head reads the tables at the path since the root, however many
cycles lie behind it. ``chain_length(config)`` = min(depth, budget) is the first cycle's
number of draft tokens (the later ones' under the "constant" schedule).

- ``AssistedGeneration``: ``assistant_model=``, schedule "constant", transformers' default
  confidence threshold 0.4 (updated as above).
- ``AssistedGenerationHeuristic``: the same, schedule "heuristic".
- ``EarlyExitGeneration``, ``PromptLookupGeneration``, ``MTPGeneration`` (a two-token
  prompt; ``MtpOnePromptToken`` keeps one and shows transformers' crash),
  ``DFlashGeneration``, ``SinglePositionMultiTokenGeneration``: the other generators.

    rheo gate --impl rheo.integrations.transformers_assisted.generations:AssistedGeneration
"""

from __future__ import annotations

import contextlib

from rheo.integrations.transformers_assisted.generators import (
    CODE_LIMIT,
    GENERATE_PARAMETERS,
    AssistedCandidateGenerator,
    Built,
    DFlashTokenCandidateGenerator,
    EarlyExitCandidateGenerator,
    GenerateCycle,
    MTPCandidateGenerator,
    PromptLookupCandidateGenerator,
    SinglePositionMultiTokenCandidateGenerator,
    chain_length,
    context_of,
    is_chain,
)
from rheo.integrations.transformers_assisted.models import Logits, State, Tables

with contextlib.suppress(ImportError):  # scikit-learn is optional, as it is to transformers
    # transformers imports roc_curve inside a cycle; imported here, before any draw is traced,
    # scipy's import-time use of NumPy's random generator stays out of the exact check's runs
    import sklearn.metrics  # type: ignore[import-untyped]  # noqa: F401


class WholeGeneration(GenerateCycle):
    """``generate``: one ``model.generate`` call of n_tokens new tokens (the module
    docstring); ``cycle`` is withdrawn, so the gate judges the generations."""

    cycle = None  # type: ignore[assignment]  # not a whole-cycle implementation: generations only

    def supports(self, config: dict) -> bool:
        """Chains (K = 1, policy "rheo", m = 0) whose codes stay exact in float64 over the
        whole generation (the drafts of its last cycle included)."""
        if not is_chain(config) or not self.sampling_supported(config):
            return False
        V, L, n = config["vocab_size"], chain_length(config), int(config.get("n_tokens", config["depth"] + 1))
        root = self.root_length(L) + len(context_of(config))
        return bool((V + 2) ** (root + n + self.draft_reach(L, n) + 1) < CODE_LIMIT)

    def draft_reach(self, L: int, n: int) -> int:
        """The most draft tokens one cycle can hold (L; more under a growing schedule)."""
        return L

    def generate(self, draft_logits: Logits, target_logits: Logits, config: dict, temperature: float) -> list[int]:
        if not self.supports(config):
            raise NotImplementedError(f"{type(self).__name__} runs chains (K = 1, policy rheo, m = 0) only")
        return self.run_generate(draft_logits, target_logits, config, temperature, int(config["n_tokens"]))


# min_tokens is not: its eos_token_id also stops generate at the first end of sequence after
# the minimum, so a generation would not hold n_tokens tokens
GENERATION_PARAMETERS = GENERATE_PARAMETERS - {"min_tokens"}


class AssistedGeneration(WholeGeneration, AssistedCandidateGenerator):
    """``generate(assistant_model=...)`` over a whole generation, schedule "constant"."""

    sampling_parameters = GENERATION_PARAMETERS


class AssistedGenerationHeuristic(AssistedGeneration):
    """``generate(assistant_model=...)``, schedule "heuristic": the number of draft tokens
    starts at L and moves by +2 / -1 from cycle to cycle."""

    def draft_reach(self, L: int, n: int) -> int:
        return L + 2 * n

    def build(self, V: int, L: int, state: State) -> Built:
        built = super().build(V, L, state)
        built.generate_kwargs["assistant_model"].generation_config.num_assistant_tokens_schedule = "heuristic"
        return built

    def generate(self, draft_logits: Logits, target_logits: Logits, config: dict, temperature: float) -> list[int]:
        """Under "heuristic" ``generate`` writes the last number of draft tokens back into the
        assistant's ``generation_config`` (``_assisted_decoding``, "persistent over multiple
        generation calls"): the next call would start from it, so calls would not be
        independent generations. Each generation starts from L again."""
        if self.supports(config):
            V, L = int(config["vocab_size"]), chain_length(config)
            built = self.built.get((V, L))
            if built is not None:
                built.generate_kwargs["assistant_model"].generation_config.num_assistant_tokens = L
        return super().generate(draft_logits, target_logits, config, temperature)


class EarlyExitGeneration(WholeGeneration, EarlyExitCandidateGenerator):
    """``generate(assistant_early_exit=1)`` over a whole generation."""

    sampling_parameters = GENERATION_PARAMETERS


class PromptLookupGeneration(WholeGeneration, PromptLookupCandidateGenerator):
    """``generate(prompt_lookup_num_tokens=L)`` over a whole generation (its n-grams are
    searched in the prompt and in what the generation emitted so far)."""

    sampling_parameters = GENERATION_PARAMETERS


class MTPGeneration(WholeGeneration, MTPCandidateGenerator):
    """``generate(use_mtp=True)`` over a whole generation (the MTP cache cropped each cycle).
    The prompt is two anchors, not one: after a one-token prompt, a cycle that rejects the
    first of L >= 2 drafts makes transformers' MTP cache correction
    (``MTPCandidateGenerator.get_candidates``, ``n_last_matches < num_mtp_layers - 1``) slice
    fewer main-model hidden states than input tokens, and the next MTP forward raises
    (``MtpOnePromptToken`` keeps that prompt; docs/transformers.md, "Whole generations")."""

    prompt_tokens = 2

    def root_length(self, L: int) -> int:
        return self.prompt_tokens + 1

    def prompt(self, tables: Tables, L: int, context: tuple[int, ...] | None = None) -> tuple[int, ...]:
        assert context is None  # supports: no sampling parameters
        anchor = tables.V
        tables.root = (anchor,) * (self.prompt_tokens + 1)  # the prompt, then the anchor its prefill emits
        return (anchor,) * self.prompt_tokens


class MtpOnePromptToken(MTPGeneration):
    """``MTPGeneration`` with the single-cycle adapter's one-token prompt: transformers'
    MTP crashes in a later cycle (the class docstring above)."""

    prompt_tokens = 1


class DFlashGeneration(WholeGeneration, DFlashTokenCandidateGenerator):
    """``generate(assistant_model=..., speculation_type="dflash")`` over a whole generation."""


class SinglePositionMultiTokenGeneration(WholeGeneration, SinglePositionMultiTokenCandidateGenerator):
    """``generate(assistant_model=<a Gemma-4 assistant>)`` over a whole generation."""
