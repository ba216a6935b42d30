"""The case matrix an ``rheo gate --impl`` implementation is judged on, and the user's own
case files (``--cases DIR``).

``impl_matrix(level)`` (levels "smoke", "quick", "deep") returns small generated case dicts
(docs/spec.md §8, each with a "name"): V 3-4 at depth 1-2 and V 5-6 at depth 3, budget
<= 6, so that every one can be enumerated exactly. Together they cover chains (K = 1, policy rheo, m = 0), trees with
every m in 0..K-1, Top-K, T in {0, 1/3, 1/2, 1, 3/2} (3/2 in float64 arithmetic: exact mode
allows only 0 and 1/k), the target filters top-k / top-p / min-p alone and together,
draft_top_k on and off, and budgets below and at the pool size (K, the root's children).
``output_law_cases(level)`` is the spread of them the statistical output-law check samples
(the first cases of the matrix: chains, trees and Top-K at several temperatures and
filters, none at T = 0, whose laws are point masses).

>>> [c["name"] for c in impl_matrix("smoke")][:2]
['chain K=1 D=2 R=2 T=1', 'tree K=2 m=1 D=2 R=3 T=1 min_p']
>>> sorted({c["temperature"] for c in impl_matrix("smoke")})
['0', '1', '1/2', '1/3', '3/2']

Specification: docs/spec.md §0-§3 (what the parameters mean), §8 (the case format).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from rheo.casefile import load_case, read_case
from rheo.checks.cases.generations import uncovered_generation_prefix
from rheo.reference import CaseError
from rheo.reference.generate import hashed_case
from rheo.reference.numbers import keep_top_k, keep_top_p, rank_order, temper

LEVELS = ("smoke", "quick", "deep")
TEMPERATURES = ("0", "1/3", "1/2", "1", "3/2")
FILTERS: dict[str, dict[str, Any]] = {
    "": {},
    "top_k": {"target_top_k": 2},
    "top_p": {"target_top_p": "3/4"},
    "min_p": {"target_min_p": "1/5"},
    "top_k top_p min_p": {"target_top_k": 3, "target_top_p": "9/10", "target_min_p": "1/10"},
}

# (kind, V, K, m, depth, beam, budget, draft_top_k); the pool size is K (the root's children)
SHAPES: list[tuple[str, int, int, int, int, int, int, int | None]] = [
    ("chain", 3, 1, 0, 1, 1, 1, None),
    ("chain", 4, 1, 0, 2, 1, 1, None),  # budget below the chain's length
    ("chain", 3, 1, 0, 2, 1, 2, 2),
    ("tree", 4, 3, 0, 1, 3, 2, None),  # budget below the pool size
    ("tree", 4, 3, 0, 1, 3, 3, 3),  # budget at the pool size
    ("tree", 3, 3, 1, 1, 3, 2, None),
    ("tree", 4, 3, 1, 1, 3, 3, None),
    ("tree", 4, 3, 2, 1, 3, 2, 3),
    ("tree", 3, 3, 2, 1, 3, 3, None),
    ("tree", 4, 3, 0, 2, 2, 4, None),
    ("tree", 4, 3, 1, 2, 2, 6, 3),
    ("tree", 3, 3, 2, 2, 1, 5, None),
    ("tree", 4, 2, 1, 2, 2, 3, None),
    ("topk", 4, 2, 0, 1, 2, 1, None),
    ("topk", 3, 2, 0, 1, 2, 2, None),
    ("topk", 4, 3, 0, 2, 2, 6, 3),
    # depth 3 (after the rest, so the earlier cases keep their rotation)
    ("topk", 6, 2, 0, 3, 2, 5, None),
    ("tree", 5, 3, 2, 3, 2, 6, 4),
]

# the spread the statistical check samples: (shape, temperature, filters, seed), first in each
# level's matrix. The smoke and quick tree cases are ones where examples/buggy_impl.py's
# ReusedUniform moves the output law by a TV of about 0.06 to 0.18 (tests/test_harness.py
# checks it is rejected); none has a filter boundary (``filter_boundaries``)
FEATURED: dict[str, list[tuple[tuple, str, str, int]]] = {
    "smoke": [
        (("chain", 3, 1, 0, 2, 1, 2, None), "1", "", 1),
        (("tree", 4, 2, 1, 2, 2, 3, None), "1", "min_p", 1005),
        (("topk", 4, 2, 0, 2, 2, 4, None), "3/2", "top_k", 2),
    ],
}
FEATURED["quick"] = FEATURED["smoke"] + [
    (("chain", 4, 1, 0, 2, 1, 2, 3), "1/3", "min_p", 5),
    (("tree", 4, 3, 1, 2, 2, 6, 3), "1/2", "top_p", 10),
    (("tree", 4, 3, 0, 2, 2, 4, None), "3/2", "min_p", 9),
]
FEATURED["deep"] = FEATURED["quick"] + [
    (("chain", 3, 1, 0, 1, 1, 1, None), "1/2", "top_k", 0),
    (("tree", 4, 3, 1, 1, 3, 3, None), "1/2", "min_p", 6),
    (("tree", 3, 3, 2, 1, 3, 3, None), "1/2", "", 8),
    (("topk", 3, 2, 0, 1, 2, 2, None), "1/2", "top_p", 14),
]
# how many (temperature, filters) pairs each shape gets per level
ROTATIONS = {"smoke": 1, "quick": 2, "deep": len(TEMPERATURES)}


def case_name(shape: tuple, temperature: str, filters: str) -> str:
    """E.g. "chain K=1 D=2 R=2 T=1/2 top_p", "tree K=3 m=1 D=2 R=5 T=1 draft_top_k=3"."""
    kind, _, K, m, depth, _, budget, draft_top_k = shape
    parts = [kind, f"K={K}"] + ([f"m={m}"] if kind == "tree" else []) + [f"D={depth}", f"R={budget}"]
    parts.append(f"T={temperature}")
    if filters:
        parts.append(filters)
    if draft_top_k is not None:
        parts.append(f"draft_top_k={draft_top_k}")
    return " ".join(parts)


def make_case(shape: tuple, temperature: str, filters: str, seed: int) -> dict[str, Any]:
    """One generated case dict with its name (float64 arithmetic where T is not 0 or 1/k)."""
    kind, n, K, m, depth, beam, budget, draft_top_k = shape
    cfg: dict[str, Any] = {
        "policy": "topk" if kind == "topk" else "rheo",
        "K": K,
        "budget": budget,
        "beam": beam,
        "temperature": temperature,
        "draft_top_k": draft_top_k,
        **FILTERS[filters],
    }
    if kind != "topk":
        cfg["m"] = m
    if temperature not in ("0", "1") and not temperature.startswith("1/"):
        cfg["arithmetic"] = "float64"
    case = hashed_case(n, seed, depth, max_weight=9, zero_share=2 if seed % 3 == 0 else 0, **cfg)
    return {"name": case_name(shape, temperature, filters), **case}


def output_law_cases(level: str) -> list[dict[str, Any]]:
    """The spread of ``impl_matrix(level)`` that the statistical output-law check samples."""
    return [make_case(shape, T, f, seed) for shape, T, f, seed in FEATURED[level]]


def impl_matrix(level: str) -> list[dict[str, Any]]:
    """Small generated cases (see the module docstring); names are unique."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    out = output_law_cases(level)
    filters = list(FILTERS)
    combos = itertools.count()
    for i, shape in enumerate(SHAPES):  # the shape's index is its tables' seed
        if level == "smoke" and i % 2:
            continue
        for _ in range(ROTATIONS[level]):
            j = next(combos)
            case = make_case(shape, TEMPERATURES[j % len(TEMPERATURES)], filters[(j + j // 5) % len(filters)], i)
            if case not in out:
                out.append(case)
    seen: dict[str, int] = {}
    for case in out:
        k = seen[case["name"]] = seen.get(case["name"], 0) + 1
        if k > 1:
            case["name"] += f" #{k}"
    return out


def filter_boundaries(case: dict[str, Any]) -> list[tuple[int, ...]]:
    """Target prefixes (length <= depth) where a target filter decides at an exact boundary:
    a top-p run whose mass is exactly p, or a token at exactly min_p times the largest. Exact
    arithmetic keeps such a token (docs/spec.md §0); float engines round either way, so the
    statistical spread (``output_law_cases``) has none (exact cases only; [] for float64)."""
    if case.get("arithmetic", "exact") != "exact":
        return []
    inst = load_case(case)
    f = inst.config.target_filters
    out = []
    for length in range(case["depth"] + 1):
        for prefix in itertools.product(range(case["vocab_size"]), repeat=length):
            law = temper(inst.target(prefix), inst.config.temperature)
            if f.top_k is not None:
                law = keep_top_k(law, f.top_k)
            if f.top_p is not None:
                cum = law[0] * 0
                hit = False
                for i in rank_order(law):
                    cum += law[i]
                    hit = hit or cum == f.top_p
                    if cum >= f.top_p:
                        break
                law = keep_top_p(law, f.top_p)
                if hit and f.top_p != 1:
                    out.append(prefix)
                    continue
            if f.min_p is not None and f.min_p > 0 and any(x == f.min_p * max(law) for x in law):
                out.append(prefix)
    return out


def read_case_dir(folder: str | Path) -> list[dict[str, Any]]:
    """The ``*.json`` case files of ``folder`` (``--cases DIR``), each read and checked
    (``rheo.casefile``), named by its "name" key or else its file name. Raises ``CaseError``
    whose field names the file: a bad file, a target table that misses a prefix a cycle of
    length depth + 1 can reach (or, with "n_tokens", a generation of n_tokens tokens:
    ``rheo.checks.cases.generations``), or a folder without case files."""
    path = Path(folder)
    if not path.is_dir():
        raise CaseError(f"--cases {folder}", "is not a folder; give a folder of case JSON files")
    files = sorted(path.glob("*.json"))
    if not files:
        raise CaseError(f"--cases {folder}", "holds no *.json case file")
    out = []
    for f in files:
        try:
            case = read_case(f)
            inst = load_case(case)
            _reachable_targets(inst)
            n_tokens = case.get("n_tokens")
            missing = None if n_tokens is None else uncovered_generation_prefix(inst, int(n_tokens))
            if missing is not None:  # a generation reads the target at every prefix up to n_tokens - 1
                raise CaseError(
                    missing.field,
                    f"{missing.message}; n_tokens = {n_tokens} needs every target prefix "
                    f"of length <= {int(n_tokens) - 1}, or lower n_tokens",
                )
        except CaseError as e:
            raise CaseError(f"--cases {f}", str(e), [CaseError(f"--cases {f}", str(x)) for x in e.errors]) from None
        out.append({**case, "name": case.get("name") or f.stem})
    return out


def _reachable_targets(inst) -> None:
    """Read the target law at every prefix of length <= depth that has positive mass (a
    missing one raises CaseError naming the prefix)."""
    stack: list[tuple[int, ...]] = [()]
    while stack:
        prefix = stack.pop()
        if len(prefix) < inst.seq_len:
            law = inst.target_law(prefix)
            stack.extend(prefix + (x,) for x in range(inst.n) if law[x] > 0)
