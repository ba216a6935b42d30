"""Helpers for tests, public for users' own tests (in the manner of ``funsor.testing``).

- ``rheo.testing.tables``: table models (``HashTableModel``, ``PrefixTableModel``,
  ``ReferenceTableModel``) that drive the fastpath with laws the reference can be handed too;
- ``rheo.testing.tiny_model``: ``TinyTreeLM``, a stateful table model with a KV-cache-like
  context, the table-free twin of ``rheo.integrations.spec_lm.SpecLM``;
- ``rheo.testing.planted``: deliberately wrong fastpath variants that calibrate the
  statistical checks (they must fire on them).
- ``rheo.testing.models``: a case's draft and target tables (the ``--impl`` protocol's
  ``draft_logits`` and ``target_logits``) as causal LMs for adapters of library loops that
  call a model: ``TableCausalLM`` (a torch module, logits at every position),
  ``as_transformers`` (a transformers ``PreTrainedModel``; transformers is imported on first
  use, ``transformers_classes()``) and ``table_models`` (the pair of one cycle);
- ``rheo.testing.engine_models``: tiny real language models (Llama, grouped-query attention,
  a sliding window, a mixture of experts, an LFM2 hybrid) from a config and a seed, a scripted
  drafter and checkpoint folders, for running engines' own speculative decoding
  (docs/engines.md; needs transformers, imported by its users, not here);
- ``rheo.testing.ranges``: the value ranges of the fastpath's outputs (probabilities,
  indices, parents before children, ...), which the fastpath never checks at run time (a
  device sync): tests check them.

Everything here needs torch (``pip install "rheosampling[torch]"``).

Specification: docs/spec.md §7 (table models serve the same laws to both engines).
"""

from .models import TableCausalLM, TableDepthError, as_transformers, table_models, transformers_classes
from .tables import HashTableModel, PrefixTableModel, ReferenceTableModel, law_logits
from .tiny_model import TinyTreeLM

__all__ = [
    "HashTableModel",
    "PrefixTableModel",
    "ReferenceTableModel",
    "TableCausalLM",
    "TableDepthError",
    "TinyTreeLM",
    "as_transformers",
    "law_logits",
    "table_models",
    "transformers_classes",
]
