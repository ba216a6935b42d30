"""Hypothesis strategies that build only valid, exact-rational case dicts.

Every case is a JSON-ready dict (docs/spec.md §8), so a counterexample is saved as it is drawn.
Tables differ across prefixes and p != q at every prefix: each table is a small pool of
distinct weight vectors, assigned to prefixes by a stable hash with a drawn salt; target
and draft pools share no vector. Instances are capped by the number of joint draws they
can imply, (n - m)^(1 + B(D-1)) for rheo, so no single example explodes; the beam and then
the depth shrink to fit the cap.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from fractions import Fraction

from hypothesis import assume
from hypothesis import strategies as st

from rheo.casefile import load_case, to_json_number
from rheo.reference.params import prefix_key

TEMPERATURES = ("0", "1/3", "1/2", "1")
DEFAULT_CAP = 3000


def joint_draw_bound(n: int, policy: str, K: int, m: int, depth: int, beam: int) -> int:
    """An upper bound on the joint draws of a case: every expansion draws from <= n - m tokens."""
    if policy == "topk":
        return 1
    return max(1, n - m) ** (1 + beam * (depth - 1))


def max_nodes(K: int, depth: int, beam: int) -> int:
    """The most recorded nodes a tree can have: K children per expansion."""
    return K * (1 + beam * (depth - 1))


def _index(salt: int, prefix: tuple, size: int) -> int:
    h = hashlib.blake2b(f"{salt}|{prefix_key(prefix)}".encode(), digest_size=4).digest()
    return int.from_bytes(h, "big") % size


def _law_strings(weights) -> list[str]:
    total = sum(weights)
    return [to_json_number(Fraction(w, total)) for w in weights]


@st.composite
def weight_vectors(draw, n: int, min_weight: int = 0, max_weight: int = 6):
    w = draw(st.lists(st.integers(min_weight, max_weight), min_size=n, max_size=n))
    assume(any(w))
    return tuple(w)


@st.composite
def dyadic_weight_vectors(draw, n: int):
    """Weights summing to a power of two: the probabilities are exactly representable in
    binary floating point, and so are products of a few of them."""
    total = 2 ** draw(st.integers(1, 4))
    cuts = sorted(draw(st.lists(st.integers(0, total), min_size=n - 1, max_size=n - 1)))
    w = tuple(b - a for a, b in zip([0] + cuts, cuts + [total]))
    return w


def _normalized(w) -> tuple:
    total = sum(w)
    return tuple(Fraction(x, total) for x in w)


@st.composite
def cases(
    draw,
    *,
    policies=("rheo", "topk"),
    max_vocab: int = 5,
    max_K: int = 4,
    max_depth: int = 3,
    temperatures=TEMPERATURES,
    sparse=(False, True),
    cap: int = DEFAULT_CAP,
    min_depth: int = 1,
    draft_zeros: bool = True,
    filters: bool = False,
    extra=None,
    min_vocab: int = 2,
    m: int | str | None = None,
    min_K: int = 1,
    dyadic_draft: bool = False,
):
    """A valid case dict. ``extra`` (a dict, or a strategy of dicts) is merged in last;
    ``m`` fixes the number of leads (an int, or "K-1" for pools without fills);
    ``dyadic_draft`` makes every draft probability a dyadic rational (float-exact scores)."""
    n = draw(st.integers(min_vocab, max_vocab))
    policy = draw(st.sampled_from(policies))
    K = draw(st.integers(min_K, max_K))
    leads: int
    if policy != "rheo":
        leads = 0
    elif m == "K-1":
        leads = K - 1
    elif m is None:
        leads = draw(st.integers(0, K - 1))
    else:
        leads = int(m)
    m = leads
    assume(leads <= K - 1)
    depth = draw(st.integers(min_depth, max_depth))
    beam = draw(st.integers(1, K))
    while depth > min_depth and joint_draw_bound(n, policy, K, leads, depth, 1) > cap:
        depth -= 1
    while beam > 1 and joint_draw_bound(n, policy, K, leads, depth, beam) > cap:
        beam -= 1
    assume(joint_draw_bound(n, policy, K, leads, depth, beam) <= cap)
    budget = draw(st.integers(1, max_nodes(K, depth, beam)))
    temperature = draw(st.sampled_from(temperatures))
    draft_top_k = draw(st.sampled_from(sparse))
    draft_top_k = draw(st.integers(1, n)) if draft_top_k else None

    target, draft = _draw_tables(draw, n, depth, dyadic_draft, draft_zeros)
    case = {
        "vocab_size": n,
        "target": target,
        "draft": draft,
        "policy": policy,
        "K": K,
        "depth": depth,
        "budget": budget,
        "beam": beam,
        "temperature": temperature,
        "draft_top_k": draft_top_k,
    }
    if policy == "rheo":
        case["m"] = m
    if filters:
        case["target_top_k"] = draw(st.one_of(st.none(), st.integers(1, n)))
        case["target_top_p"] = draw(st.one_of(st.none(), st.sampled_from(["1/2", "3/4", "9/10", "1"])))
        case["target_min_p"] = draw(st.one_of(st.none(), st.sampled_from(["0", "1/10", "1/4"])))
    if extra is not None:
        more = draw(extra) if isinstance(extra, st.SearchStrategy) else extra
        case.update(more)
    return case


def _draw_tables(draw, n: int, depth: int, dyadic_draft: bool, draft_zeros: bool) -> tuple[dict, dict]:
    """Target and draft tables over every prefix up to ``depth``: small pools of distinct
    weight vectors (target and draft share none), assigned to prefixes by a salted hash."""
    target_pool = draw(st.lists(weight_vectors(n, min_weight=0), min_size=1, max_size=3, unique_by=_normalized))
    draft_vectors = dyadic_weight_vectors(n) if dyadic_draft else weight_vectors(n, min_weight=0 if draft_zeros else 1)
    draft_pool = draw(st.lists(draft_vectors, min_size=1, max_size=3, unique_by=_normalized))
    assume(not set(map(_normalized, target_pool)) & set(map(_normalized, draft_pool)))
    salt = draw(st.integers(0, 3))

    target, draft = {}, {}
    for length in range(depth + 1):
        for prefix in itertools.product(range(n), repeat=length):
            target[prefix_key(prefix)] = _law_strings(target_pool[_index(salt, prefix, len(target_pool))])
            if length < depth:
                draft[prefix_key(prefix)] = _law_strings(draft_pool[_index(salt + 7, prefix, len(draft_pool))])
    return target, draft


def random_config(rnd: random.Random, cap: int = DEFAULT_CAP, max_vocab: int = 5, max_K: int = 4) -> dict:
    """One configuration (a case dict without tables) drawn like ``cases(filters=True)``
    draws its configuration: V 2..5, every policy, K, m, beam, budget, T in
    ``TEMPERATURES``, sparse on/off, target filters; depth and beam shrunk to the cap."""
    n = rnd.randint(2, max_vocab)
    policy = rnd.choice(("rheo", "topk"))
    K = rnd.randint(1, max_K)
    m = rnd.randint(0, K - 1) if policy == "rheo" else 0
    depth, beam = rnd.randint(1, 3), rnd.randint(1, K)
    while depth > 1 and joint_draw_bound(n, policy, K, m, depth, 1) > cap:
        depth -= 1
    while beam > 1 and joint_draw_bound(n, policy, K, m, depth, beam) > cap:
        beam -= 1
    full = max_nodes(K, depth, beam)
    # like Hypothesis, often a boundary: small budgets are where score ties decide survival
    budget = rnd.choice([1, 2, K, K + 1, full]) if rnd.random() < 0.5 else rnd.randint(1, full)
    cfg: dict = {
        "vocab_size": n,
        "policy": policy,
        "K": K,
        "depth": depth,
        "budget": min(budget, full),
        "beam": beam,
        "temperature": rnd.choice(TEMPERATURES),
        "draft_top_k": rnd.randint(1, n) if rnd.random() < 0.5 else None,
        "target_top_k": rnd.choice([None, rnd.randint(1, n)]),
        "target_top_p": rnd.choice([None, "1/2", "3/4", "9/10", "1"]),
        "target_min_p": rnd.choice([None, "0", "1/10", "1/4"]),
    }
    if policy == "rheo":
        cfg["m"] = m
    return cfg


def config_complexity(cfg: dict) -> tuple:
    """Simplest first: shallow, small vocabulary, few slots, small budget, no filters."""
    filters = sum(cfg.get(k) is not None for k in ("target_top_k", "target_top_p", "target_min_p"))
    return (
        cfg["depth"],
        cfg["vocab_size"],
        cfg["K"],
        cfg["budget"],
        cfg.get("beam") or cfg["K"],
        cfg.get("m") or 0,
        filters,
        cfg.get("draft_top_k") is not None,
        str(cfg.get("temperature")),
        json.dumps(cfg, sort_keys=True, default=str),
    )


def config_pool(seed: int, size: int, extra: list[dict] | tuple = ()) -> list[dict]:
    """``size`` configurations from ``random_config`` (seeded) plus ``extra``, without
    repeats, simplest first (``config_complexity``): Hypothesis shrinks a ``sampled_from``
    toward its first entries, so a shrunk counterexample has a simple configuration."""
    rnd = random.Random(seed)
    seen, out = set(), []
    for cfg in [random_config(rnd) for _ in range(size)] + list(extra):
        key = json.dumps(cfg, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(cfg)
    return sorted(out, key=config_complexity)


class Configs(tuple):
    """Configurations for ``cases_from_configs``; its repr stays short (Hypothesis prints
    strategy arguments)."""

    def __repr__(self) -> str:
        return f"<{len(self)} configurations>"


def cases_from_configs(configs: list[dict], dyadic_draft: bool = False, draft_zeros: bool = True):
    """A case dict: one of ``configs`` (case dicts without tables, with vocab_size and
    depth; shrinking moves toward the first) and drawn tables (as ``cases`` draws them)."""
    return _cases_from_configs(Configs(configs), dyadic_draft, draft_zeros)


@st.composite
def _cases_from_configs(draw, configs: Configs, dyadic_draft: bool, draft_zeros: bool):
    cfg = configs[draw(st.integers(0, len(configs) - 1))]
    target, draft = _draw_tables(draw, cfg["vocab_size"], cfg["depth"], dyadic_draft, draft_zeros)
    return {**cfg, "target": target, "draft": draft}


def draft_prefixes(case: dict):
    """Every prefix a draft law is given for (the ones a tree can expand)."""
    n = case["vocab_size"]
    for length in range(case["depth"]):
        yield from itertools.product(range(n), repeat=length)


@st.composite
def per_node_proxy_cases(draw, *, above_bound: bool, **kwargs):
    """Rheo cases whose proxy is identity-independent and drawn per node: anywhere in
    [q(x_{m+1}), 1] (Lemma 1's condition) or strictly below q(x_{m+1})."""
    kwargs.setdefault("policies", ("rheo",))
    case = draw(cases(**kwargs))
    inst = load_case(case)
    # a share t of the way from the bound to 1 (above), or of the bound itself (below)
    share = st.fractions(min_value=0, max_value=1, max_denominator=12)
    if not above_bound:
        share = share.filter(lambda t: 0 < t < 1)
    shares = draw(st.lists(share, min_size=1, max_size=3))
    salt = draw(st.integers(0, 3))
    table = {}
    for prefix in draft_prefixes(case):
        bound = inst.rank_bound(prefix)
        t = shares[_index(salt, prefix, len(shares))]
        if bound is None:
            value = Fraction(1)
        elif above_bound:
            value = bound + t * (1 - bound)
        else:
            value = t * bound
        table[prefix_key(prefix)] = to_json_number(value)
    case["proxy"] = {"per_prefix": table}
    return case
