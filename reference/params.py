"""The one parameter schema (docs/spec.md §1-§4 and §8).

``Params`` holds every parameter of one RheoSampling configuration, under the case-file
names. The reference, the fastpath, case files, the ``--impl`` protocol and the CLI all
use it. It is frozen and checks itself once, when it is built: a bad value raises
``CaseError`` naming the field. The number type is the only thing that differs between
the engines: exact ``Fraction`` for the reference by default, ``float`` for the fastpath
(``params.in_arithmetic("float64")``).

``Params.from_case`` reads the case-file spelling (strings such as "3/10", a proxy as
``{"constant": "1/4"}``); ``to_case`` and ``to_protocol`` write the two outward forms.
``PAPER_TREE`` is the paper's tree (K=10, D=8, R=60, draft_top_k=128, Rheo m=1).

>>> p = Params.from_case({"policy": "rheo", "K": 3, "m": 1, "depth": 1, "budget": 2})
>>> p.B, p.expansions, p.temperature.text
(3, 1, '1')
>>> PAPER_TREE.replace(m=2).m, PAPER_TREE.arithmetic
(2, 'float64')
>>> Params(policy="rheo", K=3, m=3, depth=1, budget=2)
Traceback (most recent call last):
...
rheo.reference.numbers.CaseError: m: must be <= K-1 = 2, got 3
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal, get_args

from .numbers import CaseError, Number, Temperature, parse_exact
from .sampling import CASE_KEYS as SAMPLING_KEYS
from .sampling import SamplingParameters

Policy = Literal["rheo", "topk"]
Verifier = Literal["rheo", "sample_last", "class_law"]
DraftLaw = Literal["sampled", "dense", "untempered"]
TieBreak = Literal["slot", "token"]
Arithmetic = Literal["exact", "float64"]
ProxyKind = Literal["rheo", "self", "constant", "per_prefix", "callable"]
Prefix = tuple[int, ...]

UNTEMPERED = Temperature("1", False, 1, 1.0)


def prefix_key(prefix: Prefix) -> str:
    """The case-file key of a prefix: ids joined by ",", "" for the root.

    >>> prefix_key((0, 2)), prefix_key(())
    ('0,2', '')
    """
    return ",".join(str(t) for t in prefix)


def parse_prefix(key: str, field: str = "prefix") -> Prefix:
    """The inverse of ``prefix_key``: "0,2" -> (0, 2), "" -> ().

    >>> parse_prefix("0,2"), parse_prefix("")
    ((0, 2), ())
    """
    try:
        return tuple(int(t) for t in key.split(",")) if key else ()
    except ValueError:
        raise CaseError(field, f'prefix keys are token ids joined by ",", got {key!r}') from None


@dataclass(frozen=True)
class TargetFilters:
    """The serving-engine filters applied after temperature, in this order (docs/spec.md §0).
    None = off."""

    top_k: int | None = None
    top_p: Number | None = None
    min_p: Number | None = None

    @property
    def active(self) -> bool:
        return self.top_k is not None or self.top_p is not None or self.min_p is not None


@dataclass(frozen=True)
class Proxy:
    """The sample's construction factor (docs/spec.md §2).

    kind: "rheo" (the paper's proxy), "self" (q(Y), wrong on purpose), "constant" (value c,
    wrong below the rank bound), "per_prefix" (a table of values, identity-independent;
    Lemma 1 says >= q(x_{m+1}) keeps it lossless) or "callable" (``fn(prefix, node_laws)
    -> value``, identity-independent, Python API and reference only).
    """

    kind: ProxyKind = "rheo"
    value: Number | None = None
    table: Mapping[Prefix | None, Number] | None = None
    fn: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        if self.kind == "callable" and not callable(self.fn):
            raise CaseError("proxy", f"a callable proxy needs fn(prefix, node_laws) -> value, got fn={self.fn!r}")

    @property
    def identity_independent(self) -> bool:
        return self.kind != "self"

    def describe(self) -> str | dict[str, Any]:
        """The case-file spelling of this proxy."""
        if self.kind == "constant":
            assert self.value is not None
            return {"constant": _text(self.value)}
        if self.kind == "per_prefix":
            assert self.table is not None
            return {"per_prefix": {("*" if k is None else prefix_key(k)): _text(v) for k, v in self.table.items()}}
        return self.kind


def _text(x: Number) -> str:
    """A number in the case-file spelling: "3/10" for a Fraction, the float's repr otherwise."""
    if isinstance(x, Fraction):
        return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"
    return repr(float(x))


def _need_int(name: str, value: object, lo: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise CaseError(name, f"must be an integer >= {lo}, got {value!r}")


def _need_choice(name: str, value: object, kind: Any) -> None:
    choices = get_args(kind)
    if value not in choices:
        raise CaseError(name, f"must be one of {', '.join(repr(c) for c in choices)}, got {value!r}")


@dataclass(frozen=True)
class Params:
    """Every parameter of docs/spec.md §1-§4, under the case-file names (§8).

    policy "rheo" (m leads, one sample, fills) or "topk" (the EAGLE baseline); K slots per
    expanded node; depth D; budget R nodes kept; beam B nodes expanded per layer (None =
    K); draft_top_k sparse draft law (None = the whole vocabulary). The wrong-on-purpose
    variants (proxy "self"/constant, tie_break "token", verify "sample_last"/"class_law",
    draft_law "dense"/"untempered") exist for the negative controls only. ``temperature``
    is the reference's T; the fastpath takes one T per request instead (this one is its
    default). ``sampling`` holds the request's sampling parameters (penalties, biases, bad
    words, ...: docs/spec.md §9; None = none, float64 arithmetic only).
    """

    policy: Policy
    K: int
    depth: int
    budget: int
    m: int | None = None
    beam: int | None = None
    proxy: Proxy = Proxy()
    epsilon: Number = Fraction(0)
    tie_break: TieBreak = "slot"
    temperature: Temperature = UNTEMPERED
    draft_top_k: int | None = None
    verify: Verifier = "rheo"
    draft_law: DraftLaw = "sampled"
    target_filters: TargetFilters = field(default_factory=TargetFilters)
    arithmetic: Arithmetic = "exact"
    sampling: SamplingParameters | None = None

    # case-file keys that configure the algorithm (the tables and vocab_size aside)
    CASE_KEYS = (
        "policy",
        "K",
        "m",
        "depth",
        "budget",
        "beam",
        "proxy",
        "epsilon",
        "tie_break",
        "temperature",
        "draft_top_k",
        "verify",
        "draft_law",
        "arithmetic",
        "target_top_k",
        "target_top_p",
        "target_min_p",
        *SAMPLING_KEYS,
    )

    def __post_init__(self) -> None:
        _need_choice("policy", self.policy, Policy)
        _need_int("K", self.K, 1)
        _need_int("depth", self.depth, 1)
        _need_int("budget", self.budget, 1)
        if self.policy == "rheo":
            if self.m is None:
                raise CaseError("m", 'is required when policy is "rheo" (an integer 0 <= m <= K-1)')
            _need_int("m", self.m, 0)
            if self.m >= self.K:
                raise CaseError("m", f"must be <= K-1 = {self.K - 1}, got {self.m}")
        if self.beam is not None:
            _need_int("beam", self.beam, 1)
            if self.beam > self.K:
                raise CaseError("beam", f"must be <= K = {self.K} (a node has at most K children), got {self.beam}")
        if self.draft_top_k is not None:
            _need_int("draft_top_k", self.draft_top_k, 1)
        _need_choice("tie_break", self.tie_break, TieBreak)
        _need_choice("verify", self.verify, Verifier)
        _need_choice("draft_law", self.draft_law, DraftLaw)
        _need_choice("arithmetic", self.arithmetic, Arithmetic)
        if not isinstance(self.temperature, Temperature):
            raise CaseError("temperature", "must be a Temperature (use Params.from_case to read a number or string)")
        if not isinstance(self.proxy, Proxy):
            raise CaseError("proxy", "must be a Proxy (use Params.from_case to read the case-file spelling)")
        if self.epsilon < 0:
            raise CaseError("epsilon", f"must be >= 0, got {self.epsilon}")
        p = self.proxy
        _need_choice("proxy", p.kind, ProxyKind)
        if p.kind == "constant" and (p.value is None or not (0 < p.value <= 1)):
            raise CaseError("proxy.constant", f"must lie in (0, 1], got {p.value}")
        if p.kind == "per_prefix":
            for k, v in (p.table or {}).items():
                if not (0 < v <= 1):
                    key = "*" if k is None else prefix_key(k)
                    raise CaseError(f'proxy.per_prefix["{key}"]', f"must lie in (0, 1], got {v}")
        f = self.target_filters
        if f.top_k is not None:
            _need_int("target_top_k", f.top_k, 1)
        if f.top_p is not None and not (0 < f.top_p <= 1):
            raise CaseError("target_top_p", f"must lie in (0, 1], got {f.top_p}")
        if f.min_p is not None and not (0 <= f.min_p <= 1):
            raise CaseError("target_min_p", f"must lie in [0, 1], got {f.min_p}")
        if self.sampling is not None:
            if not isinstance(self.sampling, SamplingParameters):
                raise CaseError("sampling", "must be a SamplingParameters (use Params.from_case to read case keys)")
            if self.exact:
                name = self.sampling.active[0] if self.sampling.active else "sampling"
                raise CaseError(
                    name,
                    'sampling parameters need "arithmetic": "float64" (the exponential of a bias or a penalised '
                    "logit is not rational; docs/spec.md §9)",
                )

    @property
    def B(self) -> int:
        """The beam: nodes expanded per layer (K unless set)."""
        return self.K if self.beam is None else self.beam

    @property
    def expansions(self) -> int:
        """The most expansions a tree can have: 1 + B(D-1) (docs/spec.md §3), the length of u_draw."""
        return 1 + self.B * (self.depth - 1)

    @property
    def exact(self) -> bool:
        return self.arithmetic == "exact"

    def replace(self, **changes: Any) -> Params:
        """A copy with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)

    def in_arithmetic(self, arithmetic: Arithmetic) -> Params:
        """The same algorithm with its numbers as Fractions ("exact") or floats ("float64").

        >>> PAPER_TREE.replace(epsilon=0.25).in_arithmetic("exact").epsilon
        Fraction(1, 4)
        """
        if arithmetic == self.arithmetic:
            return self
        if arithmetic == "exact" and self.sampling is not None:
            raise CaseError("arithmetic", "sampling parameters run in float64 only (docs/spec.md §9)")
        conv: Callable[[Number], Number] = (lambda x: parse_exact(x, "number")) if arithmetic == "exact" else float
        p = self.proxy
        proxy = p
        if p.kind == "constant":
            assert p.value is not None  # a constant proxy is built with its value
            proxy = Proxy("constant", value=conv(p.value))
        elif p.kind == "per_prefix":
            proxy = Proxy("per_prefix", table={k: conv(v) for k, v in (p.table or {}).items()})
        f = self.target_filters
        filters = TargetFilters(
            f.top_k, None if f.top_p is None else conv(f.top_p), None if f.min_p is None else conv(f.min_p)
        )
        temperature = Temperature.parse(self.temperature.text, arithmetic == "exact")
        return self.replace(
            arithmetic=arithmetic,
            epsilon=conv(self.epsilon),
            proxy=proxy,
            target_filters=filters,
            temperature=temperature,
        )

    @staticmethod
    def from_case(case: Mapping[str, Any]) -> Params:
        """The configuration keys of a case dict (docs/spec.md §8), read and checked.

        Numbers may be rational strings ("3/10"), decimals or Python numbers; ``proxy`` is
        "rheo", "self", {"constant": c}, {"per_prefix": {prefix: c}}, a ``Proxy`` or (Python
        API) a callable; ``temperature`` a number or a ``Temperature``. Unknown keys are an
        error naming the key; ``m`` is ignored when policy is "topk".
        """
        unknown = [k for k in case if k not in Params.CASE_KEYS and k not in ("target_filters", "sampling")]
        if unknown:
            raise CaseError(str(unknown[0]), f"unknown key; allowed keys: {', '.join(Params.CASE_KEYS)}")
        for required in ("policy", "K", "depth", "budget"):
            if case.get(required) is None:
                raise CaseError(required, "is required (see `rheo exact --help` for the case format)")
        arithmetic = case.get("arithmetic") or "exact"
        _need_choice("arithmetic", arithmetic, Arithmetic)
        exact = arithmetic == "exact"

        def num(value: Any, name: str) -> Number:
            x = parse_exact(value, name)
            return x if exact else float(x)

        kw: dict[str, Any] = {
            k: case[k]
            for k in ("policy", "K", "depth", "budget", "beam", "tie_break", "draft_top_k", "verify", "draft_law")
            if case.get(k) is not None
        }
        kw["arithmetic"] = arithmetic
        if case.get("policy") != "topk" and case.get("m") is not None:
            kw["m"] = case["m"]
        kw["epsilon"] = num(case.get("epsilon") or 0, "epsilon")
        temperature = case.get("temperature")
        kw["temperature"] = (
            temperature
            if isinstance(temperature, Temperature)
            else Temperature.parse(1 if temperature is None else temperature, exact)
        )
        kw["proxy"] = _read_proxy(case.get("proxy"), num)
        if isinstance(case.get("target_filters"), TargetFilters):
            kw["target_filters"] = case["target_filters"]
        else:
            top_k = case.get("target_top_k")
            top_p, min_p = case.get("target_top_p"), case.get("target_min_p")
            kw["target_filters"] = TargetFilters(
                top_k,
                None if top_p is None else num(top_p, "target_top_p"),
                None if min_p is None else num(min_p, "target_min_p"),
            )
        if isinstance(case.get("sampling"), SamplingParameters):
            kw["sampling"] = case["sampling"]
        else:
            kw["sampling"] = SamplingParameters.from_case(case)
        return Params(**kw)

    def to_case(self) -> dict[str, Any]:
        """The case-file spelling of these parameters (exact numbers as rational strings)."""
        out: dict[str, Any] = {"policy": self.policy, "K": self.K}
        if self.policy == "rheo":
            out["m"] = self.m
        out.update(
            depth=self.depth,
            budget=self.budget,
            beam=self.B,
            proxy=self.proxy.describe(),
            epsilon=_text(self.epsilon),
            tie_break=self.tie_break,
            temperature=self.temperature.text,
            draft_top_k=self.draft_top_k,
            verify=self.verify,
            draft_law=self.draft_law,
            arithmetic=self.arithmetic,
        )
        f = self.target_filters
        out.update(
            target_top_k=f.top_k,
            target_top_p=None if f.top_p is None else _text(f.top_p),
            target_min_p=None if f.min_p is None else _text(f.min_p),
        )
        if self.sampling is not None:
            out.update(self.sampling.to_case())
        return out

    def to_protocol(self, vocab_size: int) -> dict[str, Any]:
        """The config dict an ``--impl`` implementation receives (rheo.checks.protocol):
        case-file names, numbers as floats, beam resolved, m = 0 for Top-K."""
        f = self.target_filters
        sampling = {} if self.sampling is None else self.sampling.to_protocol()
        return {
            "vocab_size": vocab_size,
            "policy": self.policy,
            "K": self.K,
            "m": self.m if self.policy == "rheo" else 0,
            "depth": self.depth,
            "budget": self.budget,
            "beam": self.B,
            "draft_top_k": self.draft_top_k,
            "epsilon": float(self.epsilon),
            "target_top_k": f.top_k,
            "target_top_p": None if f.top_p is None else float(f.top_p),
            "target_min_p": None if f.min_p is None else float(f.min_p),
            **sampling,
        }


def _read_proxy(raw: Any, num: Callable[[Any, str], Number]) -> Proxy:
    if raw is None:
        return Proxy()
    if isinstance(raw, Proxy):
        return raw
    if isinstance(raw, Mapping) and "constant" in raw:
        return Proxy("constant", value=num(raw["constant"], "proxy.constant"))
    if isinstance(raw, Mapping) and "per_prefix" in raw:
        table: dict[Prefix | None, Number] = {}
        for k, v in raw["per_prefix"].items():
            key = None if k == "*" else parse_prefix(k, "proxy.per_prefix")
            table[key] = num(v, f'proxy.per_prefix["{k}"]')
        return Proxy("per_prefix", table=table)
    if callable(raw):
        return Proxy("callable", fn=raw)
    if raw in ("rheo", "self"):
        return Proxy(raw)
    raise CaseError("proxy", f'must be "rheo", "self", {{"constant": c}} or {{"per_prefix": {{...}}}}, got {raw!r}')


PAPER_TREE = Params(policy="rheo", K=10, depth=8, budget=60, m=1, draft_top_k=128, epsilon=0.0, arithmetic="float64")
"""The paper's tree (K=10, D=8, R=60, draft_top_k=128) with Rheo m=1, in float64: the
fastpath's and the real model's default. ``PAPER_TREE.replace(policy="topk")`` is the
EAGLE-2 baseline on the same tree."""
