"""Mixed batches (docs/adapters.md, "Mixed batches"): rows of one ``cycle_batch`` call that
are different requests, built from the small exact cases an implementation supports.

Two base cases of one vocabulary, A and B (other tables), and variants of them, each kept
only where the implementation supports it (one draft where the row's shape does not matter:
exact certification enumerates the product of the rows' draws):

- ``A, B``, one draft each: two requests of one shape, other laws;
- ``A, A at T = 0``: a greedy row among sampled rows;
- ``A with one draft, B with two``: rows of different draft lengths;
- ``A, B with a target top-k``: a sampling parameter on some rows only.

Exact certification takes batches of two rows (the joint law is the product of the rows'
enumerations); the statistical run and the permutation check take all the rows at once.
"""

from __future__ import annotations

from collections.abc import Callable

ZERO = "0"


def _variant(case: dict, suffix: str, **changes: object) -> dict:
    return {**case, **changes, "name": f"{case.get('name', '?')} [{suffix}]"}


def mixed_batches(cases: list[dict], supports: Callable[[dict], bool]) -> list[list[dict]]:
    """Batches of two rows from ``cases`` (small exact cases, each supported), the variants
    kept where ``supports(case)`` holds (the caller asks the implementation with the case's
    config); [] when no two cases share a vocabulary or no
    batch is supported."""
    sampled = [c for c in cases if str(c.get("temperature")) != ZERO and int(c["depth"]) >= 2]
    sampled.sort(key=lambda c: (int(c["vocab_size"]), int(c["depth"]), int(c["budget"])))
    for a in sampled:
        others = [b for b in cases if b["vocab_size"] == a["vocab_size"] and b.get("name") != a.get("name")]
        others = [b for b in others if str(b.get("temperature")) != ZERO and int(b["depth"]) >= 2]
        if not others:
            continue
        b = others[0]
        one_a = _variant(a, "one draft", depth=1, budget=1)
        one_b = _variant(b, "one draft", depth=1, budget=1)
        two_b = _variant(b, "two drafts", depth=2, budget=2)
        candidates = [
            [one_a, one_b],
            [one_a, _variant(one_a, "T=0", temperature=ZERO)],
            [one_a, two_b],
        ]
        if int(b["vocab_size"]) > 2 and b.get("target_top_k") is None:
            candidates.append([one_a, _variant(one_b, "target top-k 2", target_top_k=2)])
        out = [batch for batch in candidates if all(supports(c) for c in batch)]
        if out:
            return out
    return []


def one_batch(batches: list[list[dict]]) -> list[dict]:
    """Every distinct row of ``batches`` in one batch (the statistical run, the permutation
    check), each once, in the order met."""
    rows: dict[str, dict] = {}
    for batch in batches:
        for case in batch:
            rows.setdefault(str(case.get("name")), case)
    return list(rows.values())
