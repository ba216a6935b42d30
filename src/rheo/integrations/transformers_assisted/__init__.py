"""transformers' own assisted generation through the ``rheo gate --impl`` protocol.

Nothing of transformers is copied here: each adapter imports the installed package and runs
its code unmodified. Checked with transformers 5.24.0 (docs/transformers.md has the verdicts).

- ``SpeculativeSampling``: ``transformers.generation.utils._speculative_sampling``, the chain
  verifier, called as the protocol's ``verify`` on chain trees (K = 1, policy "rheo", m = 0;
  every node a sample whose ``sample_probs`` row is the law q it was drawn from).
- One adapter per candidate generator transformers ships, named like it:
  ``AssistedCandidateGenerator``, ``EarlyExitCandidateGenerator``,
  ``PromptLookupCandidateGenerator``, ``MTPCandidateGenerator``,
  ``DFlashTokenCandidateGenerator``, ``SinglePositionMultiTokenCandidateGenerator``,
  ``UniversalSpeculativeDecodingGenerator`` (and ``UniversalSpeculativeDecodingPermuted``,
  the same with a fixed vocabulary order) and
  ``AssistedCandidateGeneratorDifferentTokenizers``. Each is the protocol's whole-cycle
  ``cycle``: ONE draft-verify cycle of the real ``model.generate(...)`` (``do_sample=True``;
  ``do_sample=False`` at T = 0), with tiny table-backed models. ``generate`` itself picks
  the generator (``_get_candidate_generator``) from its arguments and models, as it does
  for a user; the adapter never builds one. ``StopAfter`` ends ``generate`` after the
  first verification (after the second iteration for the generators whose first one only
  prefills).

Whole generations (the protocol's ``generate``: every cycle of one ``generate`` call, the
caches, the draft-length schedule and the confidence threshold carried between cycles) are
in ``rheo.integrations.transformers_assisted.generations`` (``AssistedGeneration`` and one
class per generator).

Glossary (the words of docs/spec.md and of transformers' ``_assisted_decoding``):

- *root*: the token sequence the cycle starts from (the prompt, plus an *anchor* token for
  the generators whose first ``generate`` iteration only prefills); the protocol's token
  paths are the tokens after it.
- *anchor*: token id V (the models' vocabulary is V + 1): the prompt's token, which both
  tables give probability 0 after the root; before the root the target model puts all its
  mass on it, so a prefill iteration emits it deterministically.
- *chain length* L = min(depth, budget): the number of draft tokens of the cycle
  (``num_assistant_tokens``, ``prompt_lookup_num_tokens``, ``num_mtp_layers``, or DFlash's
  ``block_size`` - 1).
- *code*: a token sequence as one integer, code(s + (t,)) = code(s) * (V + 2) + t + 1,
  code(()) = 0 (``Codec``), carried in float64 hidden states so that a layer (transformers'
  own MTP ``eh_proj`` among them) extends a path by one token with a linear map. Exact while
  codes stay below 2^53 (``supports`` refuses larger cases).

The table-backed models (``TableLM``): a token's input embedding is [t + 1, 0], the first
digit of its code; the cache keeps those digits as its keys (so ``crop`` and cached decoding
work as they do for a real model); hidden states are [code, table] per position (table 0 =
target, 1 = draft); a ``TableLayer`` sets the table of its output; the head (``TableHead``,
the ``lm_head``) decodes the code and returns the logits the case's table gives for the path
since the root (the anchor's one-hot before the root). How each generator's drafter is built:

- ``AssistedCandidateGenerator``: a separate assistant ``TableLM`` whose one layer is the
  draft table; ``num_assistant_tokens`` = L, schedule "constant", transformers' default
  ``assistant_confidence_threshold`` (0.4) left on: drafting stops early after a token the
  assistant gives less than 0.4.
- ``EarlyExitCandidateGenerator``: one ``TableLM`` with two layers, the first the draft
  table and the second the target table; ``assistant_early_exit=1`` makes transformers run
  the model itself truncated to its first layer as the assistant.
- ``PromptLookupCandidateGenerator``: **ignores the draft table** (it drafts n-grams from
  the prompt, without logits). The prompt [anchor, c_1..c_L, anchor] makes its 1-gram search
  propose c_1..c_L, the draft table's greedy path (argmax at each prefix, lowest id on
  ties); candidate_logits is None, so ``_assisted_decoding`` samples every position from
  the target and keeps drafts up to the first mismatch.
- ``MTPCandidateGenerator``: the main ``TableLM`` declares ``num_mtp_layers`` = L and
  ships MTP weights in a checkpoint written once per (V, L) to a temporary folder
  (``config.name_or_path``), which ``MtpModel.from_pretrained`` loads in every ``generate``
  call: each MTP depth is transformers' ``MtpLayer`` (``enorm``, ``hnorm``, ``eh_proj``, a
  ``TableLayer`` block set to the draft table, ``post_norm``), its ``eh_proj`` weights
  extending the code by the input token, and the head shared with the main model.
- ``DFlashTokenCandidateGenerator``: a DFlash-style assistant (``TableDFlashAssistant``:
  ``target_layer_ids``, ``block_size`` = L + 1, ``mask_token_id``) that drafts the whole
  block in one forward, from the main model's hidden states and the anchor's embedding;
  the main model's ``lm_head`` turns its hidden states into the candidate logits. Its
  block position 1 gives the draft table's root law; position i > 1 cannot see the tokens
  drawn before it in the same block (they are drawn after the forward), so it gives the
  draft table's law at the table's greedy path of length i - 1.
- ``SinglePositionMultiTokenCandidateGenerator``: a Gemma-4-style pair, the path
  ``generate`` takes for Gemma-4 assistant models: ``Gemma4TableForCausalLM`` (a
  ``TableLM`` that returns ``shared_kv_states``, its cached digits) and
  ``Gemma4AssistantTableForCausalLM``, which reads [embedding of the last token ; the last
  hidden state] at one position and returns the draft table's logits and its own hidden
  state, as Gemma 4's assistant does (the names are what ``generate`` and the generator
  check, a class-name prefix; the shared key/value states are accepted and not needed).
- ``UniversalSpeculativeDecodingGenerator`` (T > 0) and
  ``AssistedCandidateGeneratorDifferentTokenizers`` (T = 0, greedy only): target and
  assistant with different tokenizers, real fast tokenizers (a ``tokenizers`` WordLevel
  model saved to a temporary folder and loaded by ``AutoTokenizer``): the assistant's has
  the target's words in reverse id order plus one word of its own, and the assistant
  (``TableLinearHeadLM``) has a real linear head, which transformers prunes to the shared
  words; transformers maps its tokens and logits to the target's ids. A real tokenizer's
  ``get_vocab()`` order changes from call to call, and the pruning follows it, so the
  sampling adapter's verdict depends on the build (``shared_order`` says what transformers
  saw); ``UniversalSpeculativeDecodingPermuted`` uses ``WordTokenizer`` (made in memory,
  ``get_vocab()`` in a permutation fixed by a seed), so its verdict is the same everywhere.

Sampling parameters (docs/spec.md §9; docs/transformers.md, "Sampling parameters"):
``AssistedCandidateGenerator``, ``EarlyExitCandidateGenerator`` and
``PromptLookupCandidateGenerator`` declare ``sampling_parameters`` (repetition_penalty,
no_repeat_ngram_size, bad_words, min_tokens, sequence_bias; their whole-generation classes
all but min_tokens) and pass them to ``generate`` as its own arguments
(``sampling_kwargs``: ``repetition_penalty``, ``no_repeat_ngram_size``, ``bad_words_ids``,
``sequence_bias``, ``min_new_tokens`` = max(0, min_tokens - len(generated)) with
``eos_token_id``), so that transformers' processors act on the target's logits at every
verified position (``_assisted_decoding``) and on the assistant's. The prompt is then the
case's history, anchor + prompt + generated, the root of the tables' paths (prompt lookup
drafts from it instead of the greedy path). ``supports`` refuses the variants transformers
does not implement (``sampling_refusal``); the prefill-first and different-tokenizer
adapters declare none (a prefill emits the anchor into the history).

Randomness is transformers' own (torch's global generator: ``torch.multinomial``,
``torch.rand_like``), ``follows_uniforms = False``. ``sampler_law`` is built from
transformers' own logits processors as ``generate`` configures them (temperature, top-k with
``top_k=0`` when off, top-p, min-p; T = 0 greedy: the argmax, lowest id on ties).

    rheo gate --impl rheo.integrations.transformers_assisted:SpeculativeSampling
    rheo gate --impl rheo.integrations.transformers_assisted:AssistedCandidateGenerator
"""

from __future__ import annotations

from rheo.integrations.transformers_assisted.generators import (
    GENERATE_PARAMETERS,
    PROCESSORS,
    AssistedCandidateGenerator,
    AssistedCandidateGeneratorDifferentTokenizers,
    Built,
    DFlashTokenCandidateGenerator,
    EarlyExitCandidateGenerator,
    GenerateCycle,
    MTPCandidateGenerator,
    Processors,
    PromptLookupCandidateGenerator,
    SinglePositionMultiTokenCandidateGenerator,
    StopAfter,
    UniversalSpeculativeDecodingGenerator,
    UniversalSpeculativeDecodingPermuted,
    WordTokenizer,
    chain_length,
    context_of,
    generation_kwargs,
    is_chain,
    one_thread,
    parameters_set,
    sampling_kwargs,
    sampling_refusal,
    usd_words,
    vocab_permutation,
)
from rheo.integrations.transformers_assisted.models import (
    CODE_LIMIT,
    DTYPE,
    FLOOR,
    TRANSFORMERS_CHECKED,
    Codec,
    Gemma4AssistantTableForCausalLM,
    Gemma4TableForCausalLM,
    Logits,
    SelectHead,
    State,
    TableAssistantOutput,
    TableConfig,
    TableDecoder,
    TableDFlashAssistant,
    TableHead,
    TableLayer,
    TableLinearHeadLM,
    TableLM,
    TableLMOutput,
    TableNorm,
    TablePreTrainedModel,
    Tables,
    identity_ids,
)
from rheo.integrations.transformers_assisted.speculative_sampling import SpeculativeSampling

__all__ = [
    "AssistedCandidateGenerator",
    "AssistedCandidateGeneratorDifferentTokenizers",
    "Built",
    "CODE_LIMIT",
    "Codec",
    "DFlashTokenCandidateGenerator",
    "DTYPE",
    "EarlyExitCandidateGenerator",
    "FLOOR",
    "Gemma4AssistantTableForCausalLM",
    "Gemma4TableForCausalLM",
    "GENERATE_PARAMETERS",
    "GenerateCycle",
    "Logits",
    "MTPCandidateGenerator",
    "PROCESSORS",
    "Processors",
    "PromptLookupCandidateGenerator",
    "SelectHead",
    "SinglePositionMultiTokenCandidateGenerator",
    "SpeculativeSampling",
    "State",
    "StopAfter",
    "TRANSFORMERS_CHECKED",
    "TableAssistantOutput",
    "TableConfig",
    "TableDFlashAssistant",
    "TableDecoder",
    "TableHead",
    "TableLM",
    "TableLMOutput",
    "TableLayer",
    "TableLinearHeadLM",
    "TableNorm",
    "TablePreTrainedModel",
    "Tables",
    "UniversalSpeculativeDecodingGenerator",
    "UniversalSpeculativeDecodingPermuted",
    "WordTokenizer",
    "chain_length",
    "context_of",
    "generation_kwargs",
    "identity_ids",
    "is_chain",
    "one_thread",
    "parameters_set",
    "sampling_kwargs",
    "sampling_refusal",
    "usd_words",
    "vocab_permutation",
]
