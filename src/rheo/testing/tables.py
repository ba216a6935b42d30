"""Table models for tests and benchmarks: ``SpecModel`` implementations whose laws (the
target p and draft q of docs/spec.md §0) come from tables, so that the reference engine
can be handed the very same laws.

A stateless table model ignores everything but the token paths. ``HashTableModel`` is the
vectorized one (any vocabulary up to 128256, a knob for how close the draft is to the
target); ``PrefixTableModel`` takes a Python function per request (designed cases, tests
only); ``ReferenceTableModel`` serves a reference ``Instance``'s tables. Each hands the
reference engine the same laws (``reference_instance``), which is what the differential and
statistical checks compare against.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from rheo.fastpath import DraftQuery, DraftTree, VerifyResult
from rheo.reference import Instance, Table, Temperature
from rheo.reference.params import Params

TargetFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (rows [n], nodes [n]) -> logits [n, V]
LogitsFn = Callable[[int, tuple[int, ...]], "Sequence[float] | torch.Tensor"]  # (request, prefix) -> logits [V]

_P = 2_147_483_647  # 2^31 - 1: hashing in int64 never overflows
_A, _C = 1_103_515_245 % _P, 48_271


def _fold(h: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Hash state h [...] extended by tokens [..., L] (entries < 0 are skipped)."""
    for i in range(tokens.shape[-1]):
        t = tokens[..., i]
        h = torch.where(t >= 0, (h * _A + t + 1) % _P, h)
    return h


def _float_law(logits: torch.Tensor, dtype: torch.dtype = torch.float64) -> tuple[float, ...]:  # logits: [V]
    """softmax(logits) computed in ``dtype``, as float64 numbers (exact: a widening cast)."""
    return tuple(torch.softmax(logits.to(dtype), -1).to(torch.float64).tolist())


class _TableBase:
    """Shared by the table models: laws at (request, token path) and reference instances."""

    vocab_size: int
    law_dtype: torch.dtype = torch.float64  # the dtype the reference's laws are computed in

    def logits_at(self, i: int, prefix: tuple[int, ...], side: str) -> torch.Tensor:  # [V]
        raise NotImplementedError

    def reference_instance(self, i: int, cfg: Params, temperature: float) -> Instance:
        """Request i's current laws as a float64 reference ``Instance`` for ``cfg``."""
        return Instance(
            self.vocab_size,
            Table("target", {}, fn=lambda pre: _float_law(self.logits_at(i, pre, "target"), self.law_dtype)),
            Table("draft", {}, fn=lambda pre: _float_law(self.logits_at(i, pre, "draft"), self.law_dtype)),
            cfg.replace(temperature=Temperature.parse(temperature, exact=False)),
        )


class HashTableModel(_TableBase):
    """Logits from a hash of (request context, token path) into two banks of random rows.

    target row = ``scale`` * N(0, 1) logits; draft row = the same row + ``draft_noise`` *
    N(0, 1) (0: the draft is the target); ``zero_fraction`` of the entries get -inf (no
    mass; at least the row's first entry stays finite). ``rows`` distinct laws per side.
    Forwards are a row gather, so a cycle's time is the algorithm's. ``shared_context``
    starts every request at the same root; ``lazy_target`` answers ``target_logits`` with
    a callable that gathers only the visited nodes' rows (statistical runs at large V).
    """

    def __init__(
        self,
        vocab_size: int,
        batch: int,
        *,
        seed: int = 0,
        rows: int = 256,
        scale: float = 2.0,
        draft_noise: float = 1.0,
        zero_fraction: float = 0.0,
        shared_context: bool = False,
        lazy_target: bool = False,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        if not 1 <= vocab_size <= 1 << 20:
            raise ValueError(f"vocab_size: must be in [1, {1 << 20}], got {vocab_size}")
        g = torch.Generator().manual_seed(seed)
        target = scale * torch.randn(rows, vocab_size, generator=g, dtype=torch.float64)
        draft = target + draft_noise * torch.randn(rows, vocab_size, generator=g, dtype=torch.float64)
        if zero_fraction > 0:
            for bank in (target, draft):
                drop = torch.rand(rows, vocab_size, generator=g, dtype=torch.float64) < zero_fraction
                drop[:, 0] = False
                bank[drop] = float("-inf")
        self.vocab_size = vocab_size
        self.rows = rows
        self.banks = {"target": target.to(device=device, dtype=dtype), "draft": draft.to(device=device, dtype=dtype)}
        self.context = ((torch.arange(batch, dtype=torch.int64) + 1) * _C + seed) % _P
        if shared_context:  # every request at the same root: b independent cycles of one law
            self.context = self.context[:1].expand(batch).clone()
        self.lazy_target = lazy_target
        self.context = self.context.to(device)
        self.batch, self.device = batch, torch.device(device or "cpu")
        self.forward_seconds = 0.0  # time spent answering forwards (benchmarks subtract it)

    def _rows(self, h: torch.Tensor) -> torch.Tensor:
        return (h * _C % _P) % self.rows

    def _prefix_rows(self, prefixes: torch.Tensor, requests: torch.Tensor | None = None) -> torch.Tensor:
        """Bank rows of token paths [n, ..., L] (-1 padded) from the contexts of
        ``requests`` [n] (default: every request, n = b)."""
        ctx = self.context if requests is None else self.context[requests]
        return self._rows(_fold(ctx.view((-1,) + (1,) * (prefixes.dim() - 2)).expand(prefixes.shape[:-1]), prefixes))

    def prefix_logits(
        self, prefixes: torch.Tensor, side: str = "target", requests: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits at token paths [n, ..., L] (-1 padded) of ``requests`` [n] (default all):
        [n, ..., V]."""
        return self.banks[side][self._prefix_rows(prefixes, requests)]

    def draft_logits(self, query: DraftQuery) -> torch.Tensor:
        if torch.compiler.is_compiling():  # inside a compiled cycle (rheo.fastpath.graph): no host clock
            return self.prefix_logits(query.prefixes, "draft")
        t0 = time.perf_counter()
        out = self.prefix_logits(query.prefixes, "draft")
        self.forward_seconds += time.perf_counter() - t0
        return out

    def target_logits(self, tree: DraftTree) -> torch.Tensor | TargetFn:
        """[b, R+1, V], or with ``lazy_target`` a callable (rows [n], nodes [n]) -> [n, V]."""
        compiling = torch.compiler.is_compiling()  # inside a compiled cycle: no host clock
        t0 = 0.0 if compiling else time.perf_counter()
        rows, bank = self._prefix_rows(tree.prefixes), self.banks["target"]
        out: torch.Tensor | TargetFn
        if self.lazy_target:  # only the visited nodes' rows are ever materialized

            def out(ix: torch.Tensor, nodes: torch.Tensor) -> torch.Tensor:
                return bank[rows[ix, nodes]]
        else:
            out = bank[rows]
        if not compiling:
            self.forward_seconds += time.perf_counter() - t0
        return out

    def advance(self, tree: DraftTree, result: VerifyResult) -> None:
        self.context.copy_(_fold(self.context, result.tokens))  # in place: a captured CUDA graph reads this tensor

    def logits_at(self, i: int, prefix: tuple[int, ...], side: str) -> torch.Tensor:  # -> [V]
        h = self.context[i : i + 1].cpu()
        if prefix:
            h = _fold(h, torch.tensor([list(prefix)], dtype=torch.int64))
        return self.banks[side][int(self._rows(h)[0])].cpu()


class PrefixTableModel(_TableBase):
    """Logits from Python functions ``fn(request, prefix) -> [V] logits`` (designed cases;
    a Python loop over nodes, for tests only). The prefix is relative to the cycle root;
    ``advance`` does nothing (every cycle starts from the same root). ``dtype`` is the
    logits' dtype; ``law_dtype`` the dtype the reference's laws are computed in (float64;
    ``dtype`` itself hands the reference the laws a float32 model computes, exactly)."""

    def __init__(
        self,
        vocab_size: int,
        batch: int,
        target: LogitsFn,
        draft: LogitsFn,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
        law_dtype: torch.dtype = torch.float64,
    ) -> None:
        self.vocab_size, self.batch = vocab_size, batch
        self.device = torch.device(device or "cpu")
        self.fns = {"target": target, "draft": draft}
        self.dtype, self.law_dtype = dtype, law_dtype

    def logits_at(self, i: int, prefix: tuple[int, ...], side: str) -> torch.Tensor:  # -> [V]
        # in the model's dtype first: the reference sees the very logits the fastpath sees
        return torch.as_tensor(self.fns[side](i, tuple(prefix)), dtype=torch.float64).to(self.dtype).to(torch.float64)

    def _table(self, side: str, paths: list[list[list[int]]], valid: torch.Tensor) -> torch.Tensor:
        """Logits [b, n, V] at token paths [b][n] (-1 padded) where valid [b, n]."""
        b, n = valid.shape
        out = torch.zeros((b, n, self.vocab_size), dtype=self.dtype)
        for i in range(b):
            for j in range(n):
                if valid[i, j]:
                    pre = tuple(t for t in paths[i][j] if t >= 0)
                    out[i, j] = self.logits_at(i, pre, side).to(self.dtype)
        return out.to(self.device)

    def draft_logits(self, query: DraftQuery) -> torch.Tensor:
        return self._table("draft", query.prefixes.tolist(), query.valid.cpu())

    def target_logits(self, tree: DraftTree) -> torch.Tensor:
        valid = torch.cat([torch.ones_like(tree.valid[:, :1]), tree.valid], 1).cpu()
        return self._table("target", tree.prefixes.tolist(), valid)

    def advance(self, tree: DraftTree, result: VerifyResult) -> None:
        pass


def law_logits(law: Sequence[Any]) -> list[float]:
    """Logits of a probability vector (log p, -inf where p = 0)."""
    return [math.log(float(x)) if x > 0 else float("-inf") for x in law]


class ReferenceTableModel(_TableBase):
    """A reference ``Instance``'s tables as a vectorized table model: every prefix up to
    the tree's depth is looked up once, logits = log p (-inf where p = 0), and forwards are
    a gather by a mixed-radix prefix code. Every request starts from the same root, so a
    batch of b requests is b independent cycles of the same instance (statistical tests)."""

    def __init__(
        self, inst: Instance, batch: int, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None
    ) -> None:
        import itertools

        n, D = inst.n, inst.config.depth
        self.vocab_size, self.batch, self.inst = n, batch, inst
        self.device = torch.device(device or "cpu")
        self.base = n + 1
        size = self.base ** (D + 1)
        if size > 5_000_000:
            raise ValueError(f"vocab_size {n} at depth {D}: {size} prefix codes, too many for a table")
        uniform = [0.0] * n
        tables = {
            s: torch.tensor([uniform] * 1, dtype=torch.float64).expand(size, n).clone() for s in ("target", "draft")
        }
        for length in range(D + 1):
            for prefix in itertools.product(range(n), repeat=length):
                code = self._code_of(prefix)
                tables["target"][code] = torch.tensor(law_logits(inst.target(prefix)), dtype=torch.float64)
                if length < D:
                    tables["draft"][code] = torch.tensor(law_logits(inst.draft(prefix)), dtype=torch.float64)
        self.tables = {s: t.to(device=self.device, dtype=dtype) for s, t in tables.items()}

    def _code_of(self, prefix: Sequence[int]) -> int:
        code = 0
        for t in prefix:
            code = code * self.base + t + 1
        return code

    def _codes(self, paths: torch.Tensor) -> torch.Tensor:  # paths: [..., L] -> [...]
        code = torch.zeros(paths.shape[:-1], dtype=torch.int64, device=paths.device)
        for i in range(paths.shape[-1]):
            t = paths[..., i]
            code = torch.where(t >= 0, code * self.base + t + 1, code)
        return code

    def logits_at(self, i: int, prefix: tuple[int, ...], side: str) -> torch.Tensor:  # -> [V]
        return self.tables[side][self._code_of(prefix)].cpu()

    def prefix_logits(
        self, prefixes: torch.Tensor, side: str = "target", requests: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits at token paths [n, ..., L] (-1 padded): [n, ..., V] (every request has
        the same root, so ``requests`` does not matter)."""
        return self.tables[side][self._codes(prefixes)]

    def draft_logits(self, query: DraftQuery) -> torch.Tensor:
        return self.prefix_logits(query.prefixes, "draft")

    def target_logits(self, tree: DraftTree) -> torch.Tensor:
        return self.prefix_logits(tree.prefixes)

    def advance(self, tree: DraftTree, result: VerifyResult) -> None:
        pass
