"""An instance: target and draft tables plus the configuration (docs/spec.md §0-§3, §8).

``Instance.node_laws(prefix)`` holds everything the draft side computes at one node
(docs/spec.md §1-§2): the truncated draft law, its ranking, the leads, the residual support
and law, the proxy and the fills; ``Instance.target_law(prefix)`` is p_T with the target
filters, after the request's sampling parameters (docs/spec.md §9) when it has any. Both
are cached per prefix. A target given as raw logits (``target_logits``, a table of logit
vectors; -inf = probability 0) is read through their softmax where a law is asked of
``target`` itself.

``Instance.deadline`` (None by default; ``certify(inst, deadline=...)`` sets it for its
run) bounds the loops over a law's ``vocab_size`` entries made here and in verification.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import Any

from .deadline import Deadline, paced
from .numbers import CaseError, Law, Number, Temperature, apply_filters, keep_top_k, parse_exact, rank_order, temper
from .params import UNTEMPERED, Params, Prefix, parse_prefix, prefix_key
from .sampling import process_logits, softmax

Config = Params  # the reference's name for the one parameter type (rheo.reference.params)
# a table in the Python API: {prefix tuple or "*" or "0,2": law}, one law for every prefix, or prefix -> law
TableSpec = Callable[[Prefix], Law] | Mapping[Any, Sequence[object]] | Sequence[object]


class Table:
    """Prefix -> law, with an optional default for unlisted prefixes ("*" in case files)."""

    def __init__(
        self,
        name: str,
        laws: Mapping[Prefix, Law],
        default: Law | None = None,
        fn: Callable[[Prefix], Law] | None = None,
    ) -> None:
        self.name = name
        self.laws = dict(laws)
        self.default = default
        self.fn = fn

    def __call__(self, prefix: Prefix) -> Law:
        law = self.laws.get(prefix)
        if law is not None:
            return law
        if self.fn is not None:
            return self.fn(prefix)
        if self.default is not None:
            return self.default
        raise CaseError(
            f'{self.name}["{prefix_key(prefix)}"]',
            f'the computation needs the law at prefix "{prefix_key(prefix)}"; give it, or give a "*" default',
        )

    @staticmethod
    def constant(name: str, law: Sequence[Number]) -> Table:
        return Table(name, {}, default=tuple(law))


@dataclass
class NodeLaws:
    """The draft side at one node (docs/spec.md §1-§2), computed once per prefix.

    ``q`` is the truncated untempered draft law (construction), ``ranked`` its ranking
    (q desc, id asc), ``leads`` x_1..x_m, ``residual_support`` U in rank order,
    ``residual`` r = (q restricted to U)^(1/T) normalized (verification and the draw),
    ``draws`` the (token, r(token)) pairs with r > 0 in rank order, ``proxy`` the sample's
    factor when it does not depend on the draw.
    """

    prefix: Prefix
    q: Law
    ranked: list[int]
    leads: list[int]
    residual_support: list[int]
    residual: Law | None
    draws: list[tuple[int, Number]]
    proxy: Number | None
    fill_count: int
    dense_residual: Law | None = None
    untempered_residual: Law | None = None

    def pool(self, y: int | None = None) -> list[tuple[int, int, str, Number]]:
        """The children (slot, token, kind, factor) of this node for draw Y = y (docs/spec.md §2)."""
        out = [(s, x, "lead", self.q[x]) for s, x in enumerate(self.leads)]
        if y is None:  # Top-K, or nothing to draw: the leads alone
            return out
        m = len(self.leads)
        out.append((m, y, "sample", self.sample_factor(y)))
        for j, x in enumerate(self.fills(y)):
            out.append((m + 1 + j, x, "fill", self.q[x]))
        return out

    def fills(self, y: int) -> list[int]:
        """F(Y): the first K-m-1 tokens of U without Y."""
        fill = min(self.fill_count, len(self.residual_support))  # islice takes no count past sys.maxsize
        return list(islice((u for u in self.residual_support if u != y), fill))

    def sample_factor(self, y: int) -> Number:
        return self.q[y] if self.proxy is None else self.proxy


class Instance:
    """Target table, draft table and configuration; the laws the algorithm reads."""

    def __init__(
        self,
        vocab_size: int,
        target: Table | None,
        draft: Table,
        config: Params,
        deadline: Deadline | None = None,
        target_logits: Table | None = None,
    ) -> None:
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
            raise CaseError("vocab_size", f"must be an integer >= 1, got {vocab_size!r}")
        self.n = vocab_size
        if target_logits is not None:
            if config.exact:
                raise CaseError("target_logits", 'raw logits need "arithmetic": "float64" (docs/spec.md §9)')
            logits = target_logits
            target = Table("target", {}, fn=lambda prefix: softmax(self._checked_logits(logits, prefix)))
        elif target is None:
            raise CaseError("target", "is required (or target_logits: raw logits)")
        self.target = target
        self.target_logits = target_logits  # the raw logits, when the case gives them
        self.draft = draft
        self.config = config
        if config.sampling is not None:
            for field, tok in config.sampling.token_ids():
                if tok >= vocab_size:
                    raise CaseError(field, f"names token {tok}, but vocab_size is {vocab_size}")
        self.deadline = deadline  # checked by the loops over vocab_size entries (None: no limit)
        self.filter_composition = "top_k_first"  # how top-k and top-p compose (numbers.FILTER_COMPOSITIONS)
        self._target_cache: dict[Prefix, Law] = {}
        self._node_cache: dict[Prefix, NodeLaws] = {}
        self._checked: set[tuple[str, Prefix]] = set()
        self._one: Number | None = None

    @property
    def exact(self) -> bool:
        return self.config.exact

    def composed(self, composition: str) -> Instance:
        """This instance with top-k and top-p composed as ``composition`` says
        (``numbers.FILTER_COMPOSITIONS``; "top_k_first" is docs/spec.md §0's): the same tables
        and configuration, its own caches."""
        if composition == self.filter_composition:
            return self
        out = Instance(self.n, self.target, self.draft, self.config, self.deadline, self.target_logits)
        if self.target_logits is not None:
            out.target = self.target  # the softmax of the logits, as this instance reads them
        out.filter_composition = composition
        return out

    @contextmanager
    def bounded(self, deadline: Deadline | None) -> Iterator[Instance]:
        """This instance with ``deadline`` in force inside the ``with`` block (None: as it is)."""
        before = self.deadline
        if deadline is not None:
            self.deadline = deadline
        try:
            yield self
        finally:
            self.deadline = before

    @property
    def one(self) -> Number:
        """The number 1 in this instance's arithmetic (Fraction, float or symbolic)."""
        if self._one is None:
            self._one = self._checked_law(self.target, ())[0] * 0 + 1
        return self._one

    @property
    def zero(self) -> Number:
        return self.one * 0

    @property
    def seq_len(self) -> int:
        """L = D + 1: the length the cycle output is continued to (docs/spec.md §5)."""
        return self.config.depth + 1

    def _checked_law(self, table: Table, prefix: Prefix) -> Law:
        law = table(prefix)
        key = (table.name, prefix)
        if key not in self._checked:
            check_law(law, self.n, self.exact, f'{table.name}["{prefix_key(prefix)}"]', self.deadline)
            self._checked.add(key)
        return law

    def _checked_logits(self, table: Table, prefix: Prefix) -> tuple[float, ...]:
        logits = tuple(float(x) for x in table(prefix))
        key = (table.name, prefix)
        if key not in self._checked:
            check_logits(logits, self.n, f'{table.name}["{prefix_key(prefix)}"]')
            self._checked.add(key)
        return logits

    def raw_target_logits(self, prefix: Prefix) -> tuple[float, ...]:
        """The target's raw logits at ``prefix``: the ``target_logits`` table's, or log p
        (-inf where p = 0) of a probability table."""
        if self.target_logits is not None:
            return self._checked_logits(self.target_logits, prefix)
        return tuple(math.log(x) if x > 0 else -math.inf for x in self._checked_law(self.target, prefix))

    def base_target_law(self, prefix: Prefix) -> Law:
        """The target's law at ``prefix`` before temperature and filters: the table's, or,
        with sampling parameters, the softmax of the processed logits (docs/spec.md §9)."""
        s = self.config.sampling
        if s is None:
            return self._checked_law(self.target, prefix)
        processed = process_logits(self.raw_target_logits(prefix), s, prefix)
        return softmax(processed, f'target at prefix "{prefix_key(prefix)}" after the sampling parameters')

    def target_law(self, prefix: Prefix) -> Law:
        """p_T(. | prefix) with the target filters (docs/spec.md §0), after the sampling
        parameters (§9) when there are any."""
        law = self._target_cache.get(prefix)
        if law is None:
            c, d = self.config, self.deadline
            tempered = temper(self.base_target_law(prefix), c.temperature, d)
            law = apply_filters(tempered, c.target_filters, d, self.filter_composition)
            self._target_cache[prefix] = law
        return law

    def target_prefixes(self) -> list[Prefix]:
        """The prefixes whose target law has been computed so far (after ``certify``: every
        prefix the certification visited), in the order first computed."""
        return list(self._target_cache)

    def node_laws(self, prefix: Prefix) -> NodeLaws:
        laws = self._node_cache.get(prefix)
        if laws is None:
            laws = self._make_node_laws(prefix)
            self._node_cache[prefix] = laws
        return laws

    def _make_node_laws(self, prefix: Prefix) -> NodeLaws:
        c, d = self.config, self.deadline
        q_raw = self._checked_law(self.draft, prefix)
        q = keep_top_k(q_raw, c.draft_top_k, d) if c.draft_top_k is not None else tuple(q_raw)
        ranked = rank_order(q, d)
        zero = q[0] * 0
        if c.policy == "topk":
            return NodeLaws(prefix, q, ranked, ranked[: c.K], [], None, [], None, 0)
        m = c.m
        assert m is not None  # Params requires m when policy is "rheo"
        leads = ranked[:m]
        support = ranked[m:]
        if not support:
            return NodeLaws(prefix, q, ranked, leads, [], None, [], None, c.K - m - 1)
        in_u = set(support)

        def residual_from(vec: Sequence[Number], temp: Temperature) -> Law:
            return temper([x if i in in_u else zero for i, x in enumerate(paced(vec, d))], temp, d)

        r = residual_from(q, c.temperature)
        draws = [(u, r[u]) for u in paced(support, d) if r[u] > 0]
        laws = NodeLaws(prefix, q, ranked, leads, support, r, draws, None, c.K - m - 1)
        if c.proxy.identity_independent:
            laws.proxy = self._proxy_value(prefix, laws)
        if c.draft_law == "dense":
            lead_set = set(leads)
            dense = [zero if i in lead_set else x for i, x in enumerate(paced(q_raw, d))]
            laws.dense_residual = temper(dense, c.temperature, d)
        elif c.draft_law == "untempered":
            laws.untempered_residual = residual_from(q, UNTEMPERED)
        return laws

    def _proxy_value(self, prefix: Prefix, laws: NodeLaws) -> Number:
        c, p = self.config, self.config.proxy
        q, ranked = laws.q, laws.ranked
        one = self.one
        if p.kind == "rheo":
            assert c.m is not None  # Params requires m when policy is "rheo"
            if c.m >= 1:
                z = one - sum(q[x] for x in laws.leads)  # m >= 1 leads: a sum of numbers of this arithmetic
                return min(q[laws.leads[-1]], z)
            return min(q[ranked[0]] + c.epsilon, one)
        if p.kind == "constant":
            assert p.value is not None  # Params reads a constant proxy with its value
            return p.value
        if p.kind == "per_prefix":
            assert p.table is not None  # Params reads a per_prefix proxy with its table
            v = p.table.get(prefix, p.table.get(None))
            if v is None:
                raise CaseError(
                    f'proxy.per_prefix["{prefix_key(prefix)}"]',
                    'the computation needs a proxy value at this prefix; give it or a "*" default',
                )
            return v
        # "callable", the last identity-independent kind ("self" has no proxy; Params refuses any other)
        assert p.kind == "callable" and p.fn is not None, p.kind
        value: Number = p.fn(prefix, laws)
        return value

    def rank_bound(self, prefix: Prefix) -> Number | None:
        """q(x_{m+1}) at this node: Lemma 1's lower bound for an identity-independent proxy."""
        laws = self.node_laws(prefix)
        return laws.q[laws.residual_support[0]] if laws.residual_support else None


def check_law(law: Sequence[Number], n: int, exact: bool, where: str, deadline: Deadline | None = None) -> None:
    """A probability vector: n entries, none negative, summing to 1 (within 1e-9 in float64)."""
    if len(law) != n:
        raise CaseError(where, f"must have vocab_size = {n} entries, got {len(law)}")
    for i, x in enumerate(paced(law, deadline)):
        if x < 0:
            raise CaseError(f"{where}[{i}]", f"must be >= 0, got {x}")
    total = sum(x for x in paced(law, deadline) if x)  # zeros skipped: a sparse law of a large vocabulary
    if exact:
        if total != 1:
            raise CaseError(where, f"must sum to exactly 1 in exact mode, sums to {total}")
    elif abs(float(total) - 1.0) > 1e-9:
        raise CaseError(where, f"must sum to 1 (within 1e-9), sums to {float(total)!r}")


def check_logits(logits: Sequence[float], n: int, where: str) -> None:
    """A logit vector: n entries, each finite or -inf, at least one finite."""
    if len(logits) != n:
        raise CaseError(where, f"must have vocab_size = {n} entries, got {len(logits)}")
    for i, x in enumerate(logits):
        if math.isnan(x) or x == math.inf:
            raise CaseError(f"{where}[{i}]", f'must be a finite number or "-inf", got {x}')
    if all(x == -math.inf for x in logits):
        raise CaseError(where, 'every entry is "-inf": no token has probability > 0')


def exact_law(values: Sequence[object], field: str, deadline: Deadline | None = None) -> Law:
    return tuple(parse_exact(v, f"{field}[{i}]") for i, v in enumerate(paced(values, deadline)))


def make_instance(
    vocab_size: int,
    target: TableSpec,
    draft: TableSpec,
    params: Params | None = None,
    *,
    deadline: Deadline | None = None,
    **config: Any,
) -> Instance:
    """Python API: tables as {prefix tuple or "*": law} dicts, or a single law for every prefix;
    the configuration as ``params`` or as case-file keywords (``Params.from_case``);
    ``deadline`` bounds reading the tables and becomes the instance's ``deadline``.

    >>> inst = make_instance(3, ["1/5", "1/2", "3/10"], ["1/2", "3/10", "1/5"],
    ...                      policy="rheo", K=3, m=1, depth=1, budget=2)
    >>> inst.node_laws(()).proxy
    Fraction(1, 2)
    """
    if params is None:
        params = Params.from_case(config)
    elif config:
        raise CaseError(next(iter(config)), "give the configuration either as params or as keywords, not both")
    exact = params.exact

    def table(name: str, spec: TableSpec) -> Table:
        conv: Callable[[Sequence[object], str], Law] = (
            (lambda v, f: exact_law(v, f, deadline))
            if exact
            else (lambda v, f: tuple(float(x) for x in paced(exact_law(v, f, deadline), deadline)))
        )
        if callable(spec):
            return Table(name, {}, fn=spec)
        if isinstance(spec, Mapping):
            laws: dict[Prefix, Law]
            default: Law | None
            laws, default = {}, None
            for k, v in spec.items():
                if k == "*":
                    default = conv(v, f'{name}["*"]')
                else:
                    key = tuple(k) if not isinstance(k, str) else parse_prefix(k, name)
                    laws[key] = conv(v, f'{name}["{prefix_key(key)}"]')
            return Table(name, laws, default)
        return Table.constant(name, conv(spec, name))

    return Instance(vocab_size, table("target", target), table("draft", draft), params, deadline)
