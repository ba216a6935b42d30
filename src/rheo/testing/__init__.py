"""Helpers for tests, public for users' own tests (in the manner of ``funsor.testing``).

- ``rheo.testing.tables``: table models (``HashTableModel``, ``PrefixTableModel``,
  ``ReferenceTableModel``) that drive the fastpath with laws the reference can be handed too;
- ``rheo.testing.tiny_model``: ``TinyTreeLM``, a stateful table model with a KV-cache-like
  context, the table-free twin of ``rheo.integrations.spec_lm.SpecLM``;
- ``rheo.testing.planted``: deliberately wrong fastpath variants that calibrate the
  statistical checks (they must fire on them).
- ``rheo.testing.ranges``: the value ranges of the fastpath's outputs (probabilities,
  indices, parents before children, ...), which the fastpath never checks at run time (a
  device sync): tests check them.

Everything here needs torch (``pip install "rheosampling[torch]"``).

Specification: docs/spec.md §7 (table models serve the same laws to both engines).
"""

from .tables import HashTableModel, PrefixTableModel, ReferenceTableModel, law_logits
from .tiny_model import TinyTreeLM

__all__ = ["HashTableModel", "PrefixTableModel", "ReferenceTableModel", "TinyTreeLM", "law_logits"]
