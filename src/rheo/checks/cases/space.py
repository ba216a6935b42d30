"""Cases drawn from what an implementation supports (``rheo gate --impl``).

Real engines implement a slice of the configuration space: chains only, Top-K trees only,
no target filters, one temperature. A fixed matrix either gives such a slice nothing to
compare (a false "nothing is proven") or thin evidence. So the gate asks ``supports`` over
a large pool of candidate configurations (``candidate_configs``: every policy; K 1-3; every
m; depth 1-3; beam; budget below, at and above the pool size K; T = 0, below 1, 1 and
above 1; each target filter off, alone and together; draft_top_k on and off), and then
picks a *covering set* (``select``): every value of every dimension (``DIMENSIONS``) that
the implementation supports appears in at least one chosen case. Two more dimensions are
properties of the tables, which ``supports`` does not see: zero-probability tokens and
exact ties in the root's draft law (``TABLE_VARIANTS`` builds them on purpose).

The selection starts from the fixed matrix's cases the implementation supports
(``rheo.checks.cases.matrix``: so an implementation of the whole space is judged on at
least what it was judged on before), adds the cheapest case for each value not yet
covered, then fills the quota (``QUOTAS``) with cases that cover new *pairs* of values.
A generated case where a target filter decides at an exact boundary (a top-p run of mass
exactly p, a token at exactly min_p times the largest: ``matrix.filter_boundaries``) is
left out: exact arithmetic keeps such a token (docs/spec.md §0), a float engine rounds
either way, so a lossless float engine could fail on it. Everything is seeded: the same
seed gives the same cases. Each check reports its
``coverage`` (``Selection.coverage``): per dimension the values covered, supported and
refused.

>>> unfiltered = lambda c: all(c.get(f"target_{k}") is None for k in ("top_k", "top_p", "min_p"))
>>> sel = select(lambda c: c["policy"] == "topk" and unfiltered(c), "exact", "smoke")
>>> sorted(sel.supported["policy"]), sorted(sel.refused["policy"])
(['topk'], ['rheo'])
>>> all(c["policy"] == "topk" for c in sel.cases)
True
>>> sel.limited_by
['policy', 'target filters']
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from rheo.casefile import load_case
from rheo.checks.cases.matrix import FILTERS, filter_boundaries, impl_matrix, output_law_cases
from rheo.checks.cases.sampling import masked_prefix, sampling_configs, sampling_names, with_logits
from rheo.checks.cases.strategies import joint_draw_bound, max_nodes
from rheo.reference.generate import hashed_case, hashed_law
from rheo.reference.sampling import PARAMETERS

DIMENSIONS = (
    "policy",
    "K",
    "m",
    "depth",
    "beam",
    "budget",
    "temperature",
    "target filters",
    "draft_top_k",
    "zero-probability tokens",
    "exact ties",
)
# every value a dimension can take, in the order reports list them
VALUES: dict[str, tuple[str, ...]] = {
    "policy": ("rheo", "topk"),
    "K": ("1", "2", "3"),
    "m": ("0", "1", "2"),
    "depth": ("1", "2", "3"),
    "beam": ("1", "2", "3"),
    "budget": ("below the pool", "at the pool", "above the pool"),
    "temperature": ("0", "below 1", "1", "above 1"),
    "target filters": ("off", "top_k", "top_p", "min_p", "together"),
    "draft_top_k": ("off", "on"),
    "zero-probability tokens": ("no", "yes"),
    "exact ties": ("no", "yes"),
    **{name: ("off", "on") for name in PARAMETERS},  # only for implementations that declare them
}
TEMPERATURES = ("0", "1/2", "1/3", "1", "3/2")  # "below 1" twice: both exact forms are tried
# (max_weight, zero_share) of the generated tables: plain (weights 1..97: ties are rare),
# zero-probability tokens, and weights 1..2 (the root's draft law nearly always has a tie)
TABLE_VARIANTS = {"plain": (97, 0), "zeros": (9, 5), "ties": (2, 0)}
QUOTAS = {  # (exact, statistical) cases per level
    "smoke": (8, 3),
    "quick": (24, 6),
    "deep": (60, 12),
}
MAX_DRAWS = 300  # candidates above this joint-draw bound are left out (exact cost)
STAT_MAX_BINS = 3**4  # statistical cases: V^(D+1) at most this (chi-square over whole sequences)
FILL_SAMPLE = 400  # candidates scored per round when filling the quota with new pairs


def temperature_class(t: Any) -> str:
    """ "0", "below 1", "1" or "above 1" for a temperature (a number or an exact string)."""
    x = Fraction(str(t))
    return "0" if x == 0 else "below 1" if x < 1 else "1" if x == 1 else "above 1"


def _filters_value(case: dict) -> str:
    on = [k for k in ("top_k", "top_p", "min_p") if not _no_op(case, f"target_{k}")]
    return "off" if not on else on[0] if len(on) == 1 else "together"


def _no_op(case: dict, key: str) -> bool:
    """A setting that does nothing: absent, a top-p of 1, a min-p of 0, a top-k or
    draft_top_k of at least the vocabulary."""
    v = case.get(key)
    if v is None:
        return True
    if key == "target_top_p":
        return Fraction(str(v)) >= 1
    if key == "target_min_p":
        return Fraction(str(v)) <= 0
    return int(v) >= int(case["vocab_size"])


def root_features(n: int, seed: int, max_weight: int, zero_share: int) -> tuple[str, str]:
    """(zero-probability tokens, exact ties) of generated tables, from their root laws:
    a zero in the root's draft or target law; two equal positive draft probabilities."""
    draft = hashed_law(n, seed, (), max_weight, zero_share, "draft")
    target = hashed_law(n, seed, (), max_weight, zero_share, "target")
    zeros = "yes" if 0 in draft or 0 in target else "no"
    positive = [x for x in draft if x > 0]
    ties = "yes" if len(set(positive)) < len(positive) else "no"
    return zeros, ties


def case_features(case: dict) -> tuple[str, str]:
    """(zero-probability tokens, exact ties) of a case with tables (its root laws, read as
    ``rheo.casefile`` reads them: a user's case file may give a default law for every
    prefix)."""
    inst = load_case(case)
    draft, target = list(inst.draft(())), list(inst.base_target_law(()))
    positive = [x for x in draft if x > 0]
    return (
        "yes" if 0 in draft or 0 in target else "no",
        "yes" if len(set(positive)) < len(positive) else "no",
    )


def dimensions(case: dict, features: tuple[str, str] | None = None, sampling: Iterable[str] = ()) -> dict[str, str]:
    """The value of every dimension a case (with or without tables) has; "m" and "beam"
    are left out where they mean nothing (Top-K has no leads; a depth-1 tree expands only
    the root). ``features`` are the table dimensions when the case has no tables yet;
    ``sampling``: the sampling parameters reported as dimensions ("on" or "off": those an
    implementation declares, docs/spec.md §9)."""
    K, depth = int(case["K"]), int(case["depth"])
    budget = int(case["budget"])
    out = {
        "policy": str(case.get("policy", "rheo")),
        "K": str(K),
        "depth": str(depth),
        "budget": "below the pool" if budget < K else "at the pool" if budget == K else "above the pool",
        "temperature": temperature_class(case.get("temperature", "1")),
        "target filters": _filters_value(case),
        "draft_top_k": "off" if _no_op(case, "draft_top_k") else "on",
    }
    if out["policy"] == "rheo":
        out["m"] = str(case.get("m", 0))
    if depth > 1:
        out["beam"] = str(case.get("beam") or K)
    if features is None and "draft" in case:
        features = case_features(case)
    if features is not None:
        out["zero-probability tokens"], out["exact ties"] = features
    if sampling:
        on = set(sampling_names(case))
        out.update({name: "on" if name in on else "off" for name in sampling})
    return out


def _shapes() -> Iterable[dict]:
    """Every (policy, K, m, depth, beam, budget, V) of the pool, cheap enough to enumerate
    exactly (``MAX_DRAWS``)."""
    for policy in ("rheo", "topk"):
        for K in (1, 2, 3):
            for m in range(K) if policy == "rheo" else [0]:
                for depth in (1, 2, 3):
                    V = (3 if (K + m) % 2 else 5) if depth == 3 else 3 + (K + m + depth) % 2
                    for beam in [K] if depth == 1 else range(1, K + 1):
                        if joint_draw_bound(V, policy, K, m, depth, beam) > MAX_DRAWS:
                            continue
                        full = max_nodes(K, depth, beam)
                        for budget in sorted({max(1, K - 1), K, min(full, K + 2)}):
                            shape = {"vocab_size": V, "policy": policy, "K": K, "depth": depth, "beam": beam}
                            shape["budget"] = budget
                            if policy == "rheo":
                                shape["m"] = m
                            yield shape


def candidate_configs() -> list[dict]:
    """The pool ``supports`` is asked over: every shape (``_shapes``) at every temperature
    (``TEMPERATURES``), target filters (``matrix.FILTERS``) and draft_top_k off and on
    (V - 1). Case dicts without tables; T = 3/2 in float64 arithmetic (exact arithmetic
    allows only 0 and 1/k)."""
    out = []
    for shape in _shapes():
        for t in TEMPERATURES:
            for f in FILTERS.values():
                for dtk in (None, shape["vocab_size"] - 1):
                    cfg = {**shape, "temperature": t, "draft_top_k": dtk, **f}
                    if t not in ("0", "1") and not t.startswith("1/"):
                        cfg["arithmetic"] = "float64"
                    out.append(cfg)
    return out


def _seed(cfg: dict, variant: str, seed: int) -> int:
    key = json.dumps(cfg, sort_keys=True)
    h = hashlib.blake2b(f"{seed}|{variant}|{key}".encode(), digest_size=4).digest()
    return int.from_bytes(h, "big") % 100_000


def _cost(cfg: dict) -> int:
    """A rough cost of certifying the case exactly: its joint draws times its sequences."""
    V, d = int(cfg["vocab_size"]), int(cfg["depth"])
    draws = joint_draw_bound(V, cfg["policy"], int(cfg["K"]), int(cfg.get("m", 0)), d, int(cfg["beam"]))
    return draws * V ** (d + 1)


def case_name(cfg: dict, variant: str = "plain") -> str:
    """E.g. "topk K=2 D=2 R=3 T=1 min_p draft_top_k=2 zeros"."""
    kind = "chain" if int(cfg["K"]) == 1 and cfg["policy"] == "rheo" else cfg["policy"]
    if kind == "rheo":
        kind = "tree"
    parts = [kind, f"K={cfg['K']}"] + ([f"m={cfg['m']}"] if kind == "tree" else [])
    parts += [f"V={cfg['vocab_size']}", f"D={cfg['depth']}", f"B={cfg['beam']}", f"R={cfg['budget']}"]
    parts.append(f"T={cfg['temperature']}")
    parts += [k.removeprefix("target_") for k in ("target_top_k", "target_top_p", "target_min_p") if k in cfg]
    if cfg.get("draft_top_k") is not None:
        parts.append(f"draft_top_k={cfg['draft_top_k']}")
    for name in sampling_names(cfg):
        form = cfg.get("repetition_penalty_form") if name == "repetition_penalty" else cfg.get("bad_words_scope")
        parts.append(f"{name}({form})" if form and name in ("repetition_penalty", "bad_words") else name)
    if variant != "plain":
        parts.append(variant)
    return " ".join(parts)


@dataclass
class Candidate:
    cfg: dict
    variant: str
    seed: int
    dims: dict[str, str]
    cost: int

    def case(self) -> dict:
        mw, zs = TABLE_VARIANTS[self.variant]
        cfg = {k: v for k, v in self.cfg.items() if k not in ("vocab_size", "depth")}
        built = hashed_case(int(self.cfg["vocab_size"]), self.seed, int(self.cfg["depth"]), mw, zs, **cfg)
        if sampling_names(self.cfg):
            built = with_logits(built)
        return {"name": case_name(self.cfg, self.variant), **built}


@dataclass
class Selection:
    """The cases chosen for one check, and what the implementation supports."""

    cases: list[dict]
    purpose: str  # "exact" | "statistical"
    quota: int
    supported: dict[str, set[str]]  # per dimension: values of some supported candidate
    refused: dict[str, set[str]]  # per dimension: values no supported candidate has
    candidates: int  # configurations asked
    supported_configs: int  # of them supported
    limited_by: list[str] = field(default_factory=list)  # dimensions with one supported value of several
    greedy_only: bool = False  # every supported candidate has T = 0
    dims: tuple[str, ...] = DIMENSIONS  # the dimensions reported
    sampling: tuple[str, ...] = ()  # the sampling parameters among them (docs/spec.md §9)
    own_design: tuple[str, ...] = ()  # settings the implementation's own design does not take

    @classmethod
    def of(
        cls,
        cases: list[dict],
        purpose: str,
        quota: int,
        supported: dict[str, set[str]],
        everything: dict[str, set[str]],
        answers: list[bool],
        dims: tuple[str, ...],
        greedy_only: bool = False,
        sampling: tuple[str, ...] = (),
        own_design: tuple[str, ...] = (),
    ) -> Selection:
        """The selection of ``cases``, its refused values and limiting dimensions derived
        from what was ``supported`` of ``everything`` asked (``values_asked``); a setting of
        ``own_design`` limits nothing."""
        limited = [d for d in dims if len(supported[d]) == 1 and len(everything[d]) > 1 and d not in own_design]
        refused = {d: everything[d] - supported[d] for d in dims}
        n_asked, n_ok = len(answers), sum(answers)
        return cls(
            cases, purpose, quota, supported, refused, n_asked, n_ok, limited, greedy_only, dims, sampling, own_design
        )

    def coverage(self, compared: Iterable[dict] | None = None) -> dict[str, dict[str, list[str]]]:
        """Per dimension (of ``dims``): the values ``covered`` by ``compared`` (default:
        every chosen case), ``supported`` and ``refused``, in ``VALUES`` order (a value
        outside it, such as a large case's K = 8, after them in numeric order)."""
        covered: dict[str, set[str]] = {d: set() for d in self.dims}
        for case in self.cases if compared is None else compared:
            for d, v in dimensions(case, sampling=self.sampling).items():
                if d in covered:
                    covered[d].add(v)
        out = {d: {k: ordered(d, s) for k, s in (("covered", covered[d]), *self._sides(d))} for d in self.dims}
        for d in self.own_design:  # its own design does not take it: nothing refused, a note instead
            if d in out:
                out[d]["refused"], out[d]["not_applicable"] = [], ["own design"]
        return out

    def _sides(self, d: str) -> tuple[tuple[str, set[str]], ...]:
        return (("supported", self.supported[d]), ("refused", self.refused[d]))

    def shortfall(self, compared: int) -> str | None:
        """Why fewer than the quota were compared: the supported space is smaller (naming
        the dimensions that limited it); None when the quota was met."""
        if compared >= self.quota:
            return None
        why = f"{compared} of a quota of {self.quota} {self.purpose} cases"
        if self.limited_by:
            dims = ", ".join(f"{d} (only {', '.join(sorted(self.supported[d]))})" for d in self.limited_by)
            return f"{why}: the supported space is smaller, limited by {dims}"
        return f"{why}: the implementation supports {self.supported_configs} of {self.candidates} configurations"


def values_asked(asked: Iterable[tuple[dict, bool]], dims: tuple[str, ...], sampling: Iterable[str] = ()):
    """(supported, everything): per dimension of ``dims``, the values of the asked cases
    ``supports`` accepted, and of all asked (pairs of a case and its answer)."""
    supported: dict[str, set[str]] = {d: set() for d in dims}
    everything: dict[str, set[str]] = {d: set() for d in dims}
    for case, ok in asked:
        for d, v in dimensions(case, sampling=sampling).items():
            if d in everything:
                everything[d].add(v)
                if ok:
                    supported[d].add(v)
    return supported, everything


def ordered(dim: str, values: Iterable[str]) -> list[str]:
    """``values`` in ``VALUES[dim]`` order, then any others in numeric order."""
    known = VALUES.get(dim, ())
    rest = sorted((v for v in set(values) if v not in known), key=lambda v: (len(v), v))
    return [v for v in known if v in values] + rest


def _pairs(dims: dict[str, str]) -> set[tuple[str, str, str, str]]:
    items = sorted(dims.items())
    return {(a, x, b, y) for i, (a, x) in enumerate(items) for b, y in items[i + 1 :]}


def _sets(case: dict, name: str, together: int, deep: bool) -> bool:
    """The case sets sampling parameter ``name`` among ``together`` parameters; with
    ``deep``, it also samples (T > 0) a tree of depth >= 2 that keeps more than the root's
    pool, so that a verified position after a draft exists and its history holds that draft."""
    got = sampling_names(case)
    if name not in got or len(got) != together:
        return False
    drafted = int(case["depth"]) >= 2 and int(case["budget"]) > int(case["K"])
    return not deep or (drafted and temperature_class(case["temperature"]) != "0")


def _stat_ok(cfg: dict) -> bool:
    return (
        temperature_class(cfg["temperature"]) != "0"
        and int(cfg["vocab_size"]) ** (int(cfg["depth"]) + 1) <= STAT_MAX_BINS
    )


def select(
    supports: Callable[[dict], bool],
    purpose: str,
    level: str,
    seed: int = 0,
    start: list[dict] | None = None,
    quota: int | None = None,
    sampling: Iterable[str] = (),
    own_design: Iterable[str] = (),
) -> Selection:
    """The covering set of ``purpose`` ("exact" or "statistical": T > 0, at most
    ``STAT_MAX_BINS`` sequences, no filter boundary) for an implementation whose
    ``supports`` answers a case dict without tables. ``start`` (default: the fixed matrix
    of the level, ``impl_matrix`` or ``output_law_cases``) comes first where supported.

    ``sampling``: the sampling parameters the implementation declares (docs/spec.md §9).
    Their cases (``rheo.checks.cases.sampling``) join the pool, each parameter becomes a
    dimension, and the selection holds, for each parameter supported, a case with it alone
    and a case with it and another. ``own_design``: settings the implementation's design does
    not take (``Implementation.own_design``): reported as not applying, never as a limit."""
    if purpose not in ("exact", "statistical"):
        raise ValueError(f"purpose must be 'exact' or 'statistical', got {purpose!r}")
    quota = QUOTAS[level][purpose == "statistical"] if quota is None else quota
    declared = tuple(p for p in PARAMETERS if p in set(sampling))
    dims = DIMENSIONS + declared
    pool = candidate_configs() + sampling_configs(declared)
    answers = [bool(supports(cfg)) for cfg in pool]
    ok_cfgs = [cfg for cfg, a in zip(pool, answers) if a]
    # a statistical case never has T = 0 (its law is a point mass): those values are not its to cover
    asked = [(c, a) for c, a in zip(pool, answers) if purpose == "exact" or temperature_class(c["temperature"]) != "0"]
    supported, everything = values_asked(asked, dims, declared)
    greedy_only = bool(ok_cfgs) and all(temperature_class(c["temperature"]) == "0" for c in ok_cfgs)
    if purpose == "statistical":
        ok_cfgs = [c for c in ok_cfgs if _stat_ok(c)]
    cands = []
    for cfg in ok_cfgs:
        for variant, (mw, zs) in TABLE_VARIANTS.items():
            s = _seed(cfg, variant, seed)
            features = dimensions(cfg, root_features(int(cfg["vocab_size"]), s, mw, zs), declared)
            cands.append(Candidate(cfg, variant, s, features, _cost(cfg)))
    for d in ("zero-probability tokens", "exact ties"):  # properties of the tables: always supported
        everything[d] = set(VALUES[d])
        supported[d] = set(VALUES[d]) if cands else set()
    chosen: list[dict] = []
    seen: set[str] = set()
    covered: set[tuple[str, str]] = set()
    pairs: set[tuple] = set()

    def take(case: dict, vetted: bool = False) -> bool:
        key = hashlib.blake2b(json.dumps(case, sort_keys=True, default=str).encode(), digest_size=8).hexdigest()
        if key in seen or ((purpose == "statistical" or not vetted) and filter_boundaries(case)):
            return False
        if sampling_names(case) and masked_prefix(case) is not None:
            return False  # every token masked somewhere: no law there
        seen.add(key)
        chosen.append(case)
        values = dimensions(case, sampling=declared)
        covered.update(values.items())
        pairs.update(_pairs(values))
        return True

    if start is None:
        start = impl_matrix(level) if purpose == "exact" else output_law_cases(level)
    for case in start:
        if supports(case):
            take(dict(case), vetted=True)
    rnd = random.Random(seed)
    order = {id(c): rnd.random() for c in cands}
    remaining = list(cands)
    for d in dims:
        for v in VALUES[d]:
            if (d, v) in covered:
                continue
            having = [c for c in remaining if c.dims.get(d) == v]
            having.sort(key=lambda c: (-len(set(c.dims.items()) - covered), c.cost, order[id(c)]))
            for c in having:
                remaining.remove(c)
                if take(c.case()):
                    break
    for name in declared if purpose == "exact" else ():  # each alone, and with another, where drafts are verified
        for together in (1, 2):
            deep = any(_sets(c.cfg, name, together, True) for c in remaining)
            if any(_sets(c, name, together, deep) for c in chosen):
                continue
            having = [c for c in remaining if _sets(c.cfg, name, together, deep)]
            having.sort(key=lambda c: (c.cfg["policy"] != "rheo", c.cost, order[id(c)]))  # rheo trees first
            for c in having:
                remaining.remove(c)
                if take(c.case()):
                    break
    while len(chosen) < quota and remaining:
        sample = rnd.sample(remaining, min(FILL_SAMPLE, len(remaining)))
        best = max(sample, key=lambda c: (len(_pairs(c.dims) - pairs), -c.cost, order[id(c)]))
        remaining.remove(best)
        take(best.case())
    names: dict[str, int] = {}
    for case in chosen:
        k = names[case["name"]] = names.get(case["name"], 0) + 1
        if k > 1:
            case["name"] += f" #{k}"
    own = tuple(d for d in DIMENSIONS if d in set(own_design))
    return Selection.of(chosen, purpose, quota, supported, everything, answers, dims, greedy_only, declared, own)
