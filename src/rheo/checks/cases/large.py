"""Statistical cases beyond exact reach: V 16 to 1,024, depth 3 to 6, K up to 8, budgets
up to 60, so that index arithmetic, deep paths and large pools are exercised where neither
exact certification nor a chi-square over V^(D+1) can go (the prefix-law check judges
them: ``rheo.checks.statistics.prefix_law``).

Their tables are generated on demand from a hash of (seed, side, token path), never listed:
a §8 case file would need V^D laws. A large case is a dict with the docs/spec.md §8
configuration keys (``vocab_size``, ``depth``, ``policy``, ``K``, ``m``, ``budget``,
``beam``, ``temperature``, ``draft_top_k``, the target filters, ``"arithmetic":
"float64"``), a ``"name"``, and ``"generated"``: the table recipe ``{"seed", "scale",
"draft_noise", "zero_share"}``. ``large_instance(case)`` is its float64 reference
``Instance``; ``rheo exact`` cannot read it (it is not a case file).

The laws: target logits ``scale * N(0, 1)`` per token (peaked like a language model's:
at scale 3 the best of 1,024 tokens holds about a sixth of the mass), draft logits the
target's plus ``draft_noise * N(0, 1)`` (so deep paths are accepted often), and with
``zero_share`` z > 0 about z/16 of the entries of either table have probability 0 (never
the row's best token). The filters' thresholds (top-p 0.87654321, min-p 0.0731) are no
ratio of small integers, so no generated law sits on a filter boundary that float64
rounding could decide either way.

>>> [c["name"] for c in large_cases(0, "smoke")]
['large tree V=16 K=8 m=3 D=5 R=60 T=1 top_k top_p min_p', 'large chain V=1024 K=1 D=3 R=3 T=0.7']
>>> inst = large_instance(large_cases(0, "smoke")[1])
>>> round(sum(inst.target_law((3, 1))), 12), inst.n
(1.0, 1024)
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

import numpy as np

from rheo.checks.cases.space import Selection, dimensions, values_asked
from rheo.checks.cases.strategies import max_nodes
from rheo.reference.instance import Instance, Table
from rheo.reference.params import Params, Prefix
from rheo.reference.sampling import CASE_KEYS as SAMPLING_KEYS

LAW_CACHE = 2048  # laws kept per table (the frequent prefixes: the root and its likely children)
GENERATED = "generated"  # the key of a large case's table recipe
# a large case carries no sampling parameters: its "generated" is the table recipe, not tokens
CONFIG_KEYS = tuple(k for k in Params.CASE_KEYS if k not in ("target", "draft", *SAMPLING_KEYS))

FILTERS: dict[str, dict[str, Any]] = {
    "": {},
    "top_k": {"target_top_k": 20},
    "top_p": {"target_top_p": "0.87654321"},
    "min_p": {"target_min_p": "0.0731"},
    "top_k top_p min_p": {"target_top_k": 40, "target_top_p": "0.87654321", "target_min_p": "0.0131"},
}

# (kind, V, K, m, depth, beam, budget, draft_top_k, temperature, filters, scale, draft_noise, zero_share)
Spec = tuple[str, int, int, int, int, int, int, "int | None", str, str, float, float, int]
# every large case; case i's tables have the seed ``seed * 1000 + i`` at every level
ALL: list[Spec] = [
    ("tree", 32, 6, 1, 3, 3, 24, None, "0.7", "", 1.5, 2.0, 0),
    ("tree", 16, 8, 3, 5, 4, 60, None, "1", "top_k top_p min_p", 2.0, 1.0, 0),
    ("chain", 128, 1, 0, 6, 1, 6, None, "1.3", "min_p", 2.5, 0.5, 2),
    ("topk", 1024, 8, 0, 3, 2, 16, 64, "1", "top_k", 3.5, 1.0, 0),
    ("chain", 1024, 1, 0, 3, 1, 3, None, "0.7", "", 3.0, 0.7, 0),
    ("tree", 64, 4, 2, 4, 2, 16, None, "1", "top_p", 2.0, 1.5, 0),
    ("tree", 256, 5, 1, 4, 2, 20, 32, "1.3", "", 2.5, 1.5, 2),
    ("tree", 512, 5, 4, 5, 3, 40, None, "0.5", "", 2.5, 0.7, 0),
    ("topk", 32, 4, 0, 6, 3, 60, None, "1", "top_k top_p min_p", 2.0, 0.5, 2),
    ("tree", 64, 8, 0, 6, 4, 60, 16, "1.5", "top_p", 2.5, 1.0, 0),
    ("tree", 1024, 8, 3, 3, 4, 48, None, "1", "top_k", 3.5, 0.7, 0),
    # Top-K trees that expand every child a layer keeps (beam = K), for designs built that way
    ("topk", 64, 3, 0, 4, 3, 30, None, "1", "", 2.0, 1.0, 0),
    ("topk", 512, 2, 0, 5, 2, 18, 32, "0.7", "top_p", 2.5, 1.0, 2),
]
# the cases of each level, as indices into ALL. Case 1 (m = 3, every filter, budget 60) is
# where the lossy examples show: examples/buggy_impl.py's ReusedUniform moves its first
# token's law (chi-square p ~ 1e-68 at 2,500 cycles), eagle_style's EagleReleaseBonusBug
# emits tokens the filters remove
LEVELS: dict[str, list[int]] = {"smoke": [1, 4], "quick": [1, 2, 3], "deep": list(range(len(ALL)))}


def case_name(spec: Spec) -> str:
    """E.g. "large tree V=256 K=4 m=1 D=4 R=16 T=0.7 top_p"."""
    kind, V, K, m, depth, _, budget, draft_top_k, temperature, filters = spec[:10]
    parts = ["large", kind, f"V={V}", f"K={K}"] + ([f"m={m}"] if kind == "tree" else [])
    parts += [f"D={depth}", f"R={budget}", f"T={temperature}"]
    if filters:
        parts.append(filters)
    if draft_top_k is not None:
        parts.append(f"draft_top_k={draft_top_k}")
    return " ".join(parts)


def large_case(spec: Spec, seed: int) -> dict[str, Any]:
    """One large case dict (see the module docstring) from its spec and the tables' seed."""
    kind, V, K, m, depth, beam, budget, draft_top_k, temperature, filters, scale, noise, zeros = spec
    case: dict[str, Any] = {
        "name": case_name(spec),
        "vocab_size": V,
        "depth": depth,
        "policy": "topk" if kind == "topk" else "rheo",
        "K": K,
        "budget": budget,
        "beam": beam,
        "temperature": temperature,
        "arithmetic": "float64",
        **FILTERS[filters],
        GENERATED: {"seed": seed, "scale": scale, "draft_noise": noise, "zero_share": zeros},
    }
    if kind != "topk":
        case["m"] = m
    if draft_top_k is not None:
        case["draft_top_k"] = draft_top_k
    return case


def large_cases(seed: int = 0, level: str = "quick") -> list[dict[str, Any]]:
    """The candidate pool at ``level``: "deep" (13 cases) covers chains, Rheo trees (m = 0 to
    4) and Top-K trees (two with beam = K); V 16 to 1,024, depth 3 to 6, K 1 to 8, budgets 3 to 60; T 0.5 to 1.5;
    the target filters off, alone and all together; draft_top_k on and off; zero-probability
    entries in some. "quick" (3) holds V 16, 128 and 1,024, depth 3 to 6, K 1 to 8, budgets
    6 to 60, a Rheo tree (m = 3), a Top-K tree and a chain, T 1 and 1.3, each filter and
    draft_top_k; "smoke" (2) the tree and a V = 1,024 chain at T = 0.7. Case i of ``ALL``
    has the tables' seed ``seed * 1000 + i``."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    return [large_case(ALL[i], seed * 1000 + i) for i in LEVELS[level]]


POOL_TEMPERATURES = ("0.5", "1", "1.5")  # with each case's own: below 1, 1 and above 1 for every shape
LARGE_DIMS = ("policy", "K", "m", "depth", "beam", "temperature", "target filters", "draft_top_k")


POOL_K = (2, 3, 4)  # every multi-draft shape also with this many children a node (where fewer than its own)


def narrowed(spec: Spec, K: int) -> Spec:
    """``spec`` with ``K`` children a node (``K`` at most its own): m and beam cut to fit
    (m <= K - 1, beam <= K) and the budget to the full tree (``max_nodes``); V, depth and
    the rest kept, so a verifier of small pools meets the large vocabularies and deep paths.

    >>> case_name(narrowed(ALL[1], 2))
    'large tree V=16 K=2 m=1 D=5 R=18 T=1 top_k top_p min_p'
    """
    kind, V, _, m, depth, beam, budget = spec[:7]
    beam = min(beam, K)
    return (kind, V, K, min(m, K - 1), depth, beam, min(budget, max_nodes(K, depth, beam))) + spec[7:]


def large_pool(seed: int = 0) -> list[dict[str, Any]]:
    """The candidates ``select_large`` asks ``supports`` over: every case of ``ALL``, every
    multi-draft one also with the fewer children a node of ``POOL_K`` (``narrowed``: the
    small pools of the small cases, K 2 to 4, at V up to 1,024 and depth up to 6), at its
    own temperature and at 0.5, 1 and 1.5, with each target filter off, alone and together,
    draft_top_k off and on (V / 16, at least K), and every chain also as a greedy-draft chain
    (policy topk, K = 1). The tables of case i are those of ``large_cases`` at every
    variant."""
    out = []
    for i, spec in enumerate(ALL):
        shapes = [spec] + ([("topk",) + spec[1:]] if spec[0] == "chain" else [])
        shapes += [narrowed(spec, k) for k in POOL_K if 2 <= k < spec[2]]
        for shape in shapes:
            dtks = {shape[7], None, max(shape[2], shape[1] // 16)}
            for t in dict.fromkeys((shape[8], *POOL_TEMPERATURES)):
                for f in FILTERS:
                    for dtk in sorted(dtks, key=lambda x: -1 if x is None else x):
                        variant = shape[:7] + (dtk, t, f) + shape[10:]
                        out.append(large_case(variant, seed * 1000 + i))
    return out


def _gain(case: dict[str, Any], covered: set[tuple[str, str]]) -> int:
    return len({(d, v) for d, v in dimensions(case).items() if d in LARGE_DIMS} - covered)


def _large_cost(case: dict[str, Any]) -> int:
    return int(case["vocab_size"]) * int(case["budget"]) * int(case["depth"])


def k_order(values: set[str]) -> list[str]:
    """The order ``select_large`` covers the supported values of K in: the largest pool,
    the smallest of several drafts, a chain, then the rest from large to small, so that a
    quota of 2 or 3 spans what is supported and a verifier of several drafts a node gets
    those before chains.

    >>> k_order({"1", "2", "3", "4", "8"}), k_order({"1"}), k_order({"2", "3"})
    (['8', '2', '1', '4', '3'], ['1'], ['3', '2'])
    """
    multi = sorted((v for v in values if v != "1"), key=int, reverse=True)
    first = multi[:1] + multi[-1:] if len(multi) > 1 else multi
    return first + (["1"] if "1" in values else []) + [v for v in multi if v not in first]


def select_large(supports, level: str, seed: int = 0, own_design: tuple[str, ...] = ()) -> Selection:
    """The large cases of ``level`` (``large_cases``) that ``supports`` accepts, then, up to
    the level's count, a supported candidate of ``large_pool`` for each supported value of
    K not yet covered (in ``k_order``; of those with it, the one covering the most values of
    ``LARGE_DIMS`` not yet covered, cheapest first), then the candidates that cover the most
    such values, of the K least represented so far, cheapest first: an implementation of a
    slice gets its slice's large cases, several drafts a node where it verifies them, in
    proportion to the values of K it supports (the small cases cover every supported value
    likewise: ``rheo.checks.cases.space.select``). The same seed gives the same cases.
    ``own_design``: the settings the implementation's design does not take (reported so,
    never as a limit).

    >>> sel = select_large(lambda c: c["policy"] == "rheo" and c["K"] <= 3, "quick")  # chains and trees
    >>> sorted(c["K"] for c in sel.cases)
    [1, 2, 3]
    """
    start = large_cases(seed, level)
    quota = len(start)
    pool = large_pool(seed)
    answers = [bool(supports(c)) for c in pool]
    supported, everything = values_asked(zip(pool, answers), LARGE_DIMS)
    chosen = [c for c in start if supports(c)]
    names = {c["name"] for c in chosen}
    covered = {(d, v) for c in chosen for d, v in dimensions(c).items() if d in LARGE_DIMS}
    remaining = [c for c, ok in zip(pool, answers) if ok and c["name"] not in names]
    per_k = Counter(str(c["K"]) for c in chosen)

    def take(best: dict[str, Any]) -> None:
        nonlocal remaining
        remaining = [c for c in remaining if c["name"] != best["name"]]
        chosen.append(best)
        per_k[str(best["K"])] += 1
        covered.update((d, v) for d, v in dimensions(best).items() if d in LARGE_DIMS)

    for k in k_order(supported["K"]):
        having = [c for c in remaining if str(c["K"]) == k]
        if len(chosen) < quota and having and ("K", k) not in covered:
            take(min(having, key=lambda c: (-_gain(c, covered), _large_cost(c), c["name"])))
    while len(chosen) < quota and remaining:
        take(min(remaining, key=lambda c: (-_gain(c, covered), per_k[str(c["K"])], _large_cost(c), c["name"])))
    own = tuple(d for d in LARGE_DIMS if d in set(own_design))
    return Selection.of(chosen, "beyond exact reach", quota, supported, everything, answers, LARGE_DIMS, own_design=own)


def is_large(case: dict[str, Any]) -> bool:
    """A generated large case (its tables a recipe, not listed)."""
    return isinstance(case.get(GENERATED), dict)


def _stream(seed: int, side: int, prefix: Prefix) -> np.random.Generator:
    return np.random.default_rng([seed, side, len(prefix), *prefix])


def _law(logits: np.ndarray) -> tuple[float, ...]:
    finite = np.isfinite(logits)
    e = np.zeros_like(logits)
    e[finite] = np.exp(logits[finite] - logits[finite].max())
    return tuple((e / e.sum()).tolist())


def generated_logits(recipe: dict[str, Any], n: int, prefix: Prefix, side: str) -> np.ndarray:
    """The ``side`` ("target" or "draft") logits [V] at ``prefix`` (-inf: probability 0)."""
    seed = int(recipe["seed"])
    logits = float(recipe["scale"]) * _stream(seed, 0, prefix).standard_normal(n)
    if side == "draft":
        logits = logits + float(recipe["draft_noise"]) * _stream(seed, 1, prefix).standard_normal(n)
    zeros = int(recipe.get("zero_share", 0))
    if zeros:
        cut = _stream(seed, 2 if side == "target" else 3, prefix).integers(0, 16, size=n) < zeros
        cut[int(np.argmax(logits))] = False
        logits[cut] = -np.inf
    return logits


def large_instance(case: dict[str, Any]) -> Instance:
    """The float64 reference instance of a large case: its configuration, and tables that
    compute each law from the recipe when asked (``generated_logits``)."""
    recipe, n = case[GENERATED], int(case["vocab_size"])
    params = Params.from_case({k: case[k] for k in CONFIG_KEYS if k in case})

    def table(side: str) -> Table:
        @functools.lru_cache(maxsize=LAW_CACHE)
        def law(prefix: Prefix) -> tuple[float, ...]:
            return _law(generated_logits(recipe, n, prefix, side))

        return Table(side, {}, fn=law)

    return Instance(n, table("target"), table("draft"), params)
