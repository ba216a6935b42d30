"""Where a whole generation stops (docs/spec.md §8, "Stops"): after an EOS id or a stop
sequence, or at max_tokens (a case's ``n_tokens``). The case-file keys ``stop_token_ids`` and
``stop_sequences``: ``stops_of`` reads them, ``check_stops`` checks them against the
vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .numbers import CaseError


@dataclass(frozen=True)
class Stops:
    """Where a whole generation stops before ``n_tokens`` (max_tokens): right after a token of
    ``token_ids`` (EOS), or right after the last token of one of ``sequences``; the stop
    token or sequence is part of the output (docs/spec.md §8, "Stops")."""

    token_ids: frozenset[int]
    sequences: tuple[tuple[int, ...], ...]

    def at(self, tokens: tuple[int, ...]) -> bool:
        """``tokens`` end at a stop (its last token is a stop token or ends a stop sequence)."""
        if not tokens:
            return False
        if tokens[-1] in self.token_ids:
            return True
        return any(len(tokens) >= len(s) and tokens[-len(s) :] == s for s in self.sequences)


def stops_of(case: dict[str, Any]) -> Stops | None:
    """The case's stops (``stop_token_ids``, ``stop_sequences``), or None."""
    ids, seqs = case.get("stop_token_ids") or [], case.get("stop_sequences") or []
    if not ids and not seqs:
        return None
    return Stops(frozenset(int(t) for t in ids), tuple(tuple(int(t) for t in s) for s in seqs))


def check_stops(case: dict[str, Any], n: int) -> None:
    """``stop_token_ids`` and ``stop_sequences`` (a whole generation's stops, docs/spec.md §8):
    ids in the vocabulary, each sequence at least one token long."""
    for i, t in enumerate(case.get("stop_token_ids") or []):
        if isinstance(t, int) and 0 < n <= t:
            raise CaseError(f"stop_token_ids[{i}]", f"names token {t}, but vocab_size is {n}")
    for i, seq in enumerate(case.get("stop_sequences") or []):
        if isinstance(seq, list) and not seq:
            raise CaseError(f"stop_sequences[{i}]", "is empty: a stop sequence holds at least one token id")
        for j, t in enumerate(seq if isinstance(seq, list) else []):
            if isinstance(t, int) and 0 < n <= t:
                raise CaseError(f"stop_sequences[{i}][{j}]", f"names token {t}, but vocab_size is {n}")
