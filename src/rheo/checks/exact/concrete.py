"""Exact certification through code the symbolic tracer cannot follow: Triton or C++ kernels,
in-place operations, ``.item()`` / ``float()`` (docs/gate.md, "Concrete draws").

Every torch draw gets *concrete* values chosen by the enumerator instead of symbolic ones, and
the output's dependence on them is found from the outside, one *block* at a time:

- a **uniform** (``torch.rand``, ``rand_like``, ``Tensor.uniform_``; one block per element):
  the output is taken to be a step function of it, each output on one interval; the cuts are
  found by bisection on the generator's own grid (k / 2^24 for float32, k / 2^53 for float64),
  each cell weighted by its length. Where its cuts move when another uniform of its row goes
  to 0 or to its top, the row is a race (``rheo.checks.exact.concrete_race``);
- an **exponential race** (``Tensor.exponential_``, one block per row of the last dimension;
  or a row of uniforms whose elements compete): the output is taken to depend on the row only
  through the order of w_k / E_k for unknown weights w. The weights are recovered by bisecting
  one value at a time with the others fixed, and the order prefixes the output depends on are
  weighted by the Plackett-Luce law of ordered draws without replacement;
- a **categorical** draw (``torch.multinomial``, ``bernoulli``, a small-range ``randint``): its
  options are enumerated with their weights. ``torch.multinomial(q, n, replacement=False)``
  is one per row, over the ordered n-tuples of distinct tokens with their Plackett-Luce
  probabilities (``rheo.checks.exact.concrete_mode``); a draw of more than ``MAX_TUPLES``
  tuples is refused with a line naming it and the way out.

A block is resolved only where it matters: at each node of the enumeration the first block, in
draw order, whose value changes the output (the others at their current values) is split, each
part fixed at a representative value, and the enumeration goes on below it; a node where no
block matters is a leaf. That is exact only while the cells of each block do not depend on
where the earlier blocks fell inside theirs: **the product check** (``check_product``) shows it
before any weight counts, rebuilding every node with each block above it moved to the other
values of its cell, and refuses, naming both draws, where a node comes out otherwise. Random
probes are the second line: whole random points, each located in the tree of cells, must give
their leaf's output; a probe that does not is traced to the first block whose value alone
changes the answer, and that draw is refused with one line naming it and its file:line. A
``randint`` over a range too wide to enumerate (one that seeds another generator) is refused
with a line saying how to avoid it.

An implementation with ``cycle_batch(draft_logits, target_logits, config, temperature, rows)``
(rows copies of the request in one engine batch, row r's draws the r-th equal slice along dim
0 of every draw) has many points evaluated per call: a bisection then costs a few calls.

Specification: docs/spec.md §5 (the law judged), §7.
"""

from __future__ import annotations

import math
import random as _random
import time
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import torch

from rheo.checks.exact import budget
from rheo.checks.exact.concrete_mode import DELTA, Block, ConcreteMode, Layout, NotRowwise, Run
from rheo.checks.exact.concrete_race import (
    Assign,
    Node,
    Part,
    RaceSplits,
    RaceView,
    _h,
    _one_low,
    _plain,
    _same,
    long_race,
    unread_race,
)
from rheo.checks.exact.random_values import SCHEDULE_NEEDED, ScheduleChanged, Unsupported
from rheo.checks.exact.tracer import RunCap

# ---- the enumeration ----


class Finer(Exception):
    """The product check made a draw's split finer (``ConcreteLaw.finer``): build the tree again."""


Evaluate = Callable[[list[dict[int, Any]]], list[Run]]


class ConcreteLaw(RaceSplits):
    """The exact law of ``evaluate``'s output over its draws (see the module docstring).

    ``evaluate(points) -> runs`` runs the implementation once per point (or once for all,
    batched) under a ``ConcreteMode``; ``batch`` is how many points one call may take."""

    def __init__(self, evaluate: Evaluate, layout: Layout, batch: int, rng: np.random.Generator) -> None:
        self.evaluate_raw, self.layout, self.batch, self.rng = evaluate, layout, max(1, batch), rng
        self.width = self.batch  # points per interval and round of a bisection (``concrete_law`` sets it)
        self.memo: dict[tuple, Run] = {}
        self.cuts: dict[Any, list[int]] = {}  # per block (and race token): the cuts found so far, tried first
        self.checked = 0  # product check: the points a node was rebuilt at
        self.scaled: set[tuple[tuple[int, ...], str]] = set()  # the races whose form was checked
        self.found: dict[Any, int] = {}  # the race cuts found by the latest split
        self.hint: dict[Any, int] = {}  # product check: the cuts the node being rebuilt had, tried first
        self.finer: dict[tuple[int, ...], int] = {}  # draws split finer (check_product): ungrouped; a race's prefix
        self.lanes: dict[tuple[int, ...], set[int]] = {}  # a long race's tokens found by its group tests so far

    # evaluation, memoized, in batches

    def _key(self, point: dict[int, Any]) -> tuple:
        return tuple(sorted(point.items()))

    def eval(self, points: list[dict[int, Any]], fresh: bool = False) -> list[Run]:
        """The runs at ``points`` (memoized; ``fresh``: run again, as the probes must, so
        that randomness the mode does not answer shows)."""
        if fresh:
            out: list[Run] = []
            for i in range(0, len(points), self.batch):
                out += self.evaluate_raw(points[i : i + self.batch])
            return out
        keys = [self._key(p) for p in points]
        todo = {k: p for k, p in zip(keys, points) if k not in self.memo}  # each new point once
        new = list(todo.items())
        for i in range(0, len(new), self.batch):
            chunk = new[i : i + self.batch]
            for (k, _), run in zip(chunk, self.evaluate_raw([p for _, p in chunk])):
                self.memo[k] = run
        return [self.memo[k] for k in keys]

    # one node: the first block that matters at a point, split into cells

    def _scan_points(self, b: Block, point: dict[int, Any], weights: dict[int, list[float]]) -> list[dict]:
        if b.kind == "u":
            return [{**point, b.id: 0}, {**point, b.id: (1 << b.grid) - 1}]
        if b.kind == "race":
            return [{**point, b.id: _one_low(b.size, j, DELTA)} for j in range(b.size)]
        w = b.weights or weights.get(b.id) or []
        return [{**point, b.id: j} for j in range(len(w)) if w[j] > 0]

    def local(self, point: Assign) -> Node:
        """The node at ``point`` without the tree below it: a leaf where no block not fixed by
        ``point`` changes the output, else the first such block in draw order, split into its
        cells (a uniform whose cuts move with the others of its row: the row, as a race).
        Where a draw is a race over more than ``GROUP_FROM`` tokens, ``_early`` may pick the
        block first, and such a race that no group test shows to matter is passed over for
        the next block; a leaf is refused while one is (``unread_race``)."""
        here = self.eval([point])[0]
        early = self._early(point)
        if early is not None:
            node = self._split(early, point, here)
            node.point = dict(point)
            return node
        unread: list[Block] = []
        i = 0
        while i < len(self.layout.blocks):  # blocks appear as draws are made; scan in draw order
            unfixed = [b for b in self.layout.blocks[i:] if b.id not in point]
            if not unfixed:
                break
            # every block's answers in one call where rows are cheap; else one block at a time, stopping
            # at the first that matters
            groups = [unfixed] if self.width > 1 else [[b] for b in unfixed]
            for group in groups:
                scans = {b.id: self._scan_points(b, point, here.weights) for b in group if not long_race(b)}
                runs = iter(self.eval([p for ps in scans.values() for p in ps]))
                for b in group:  # in draw order
                    if long_race(b):
                        matters = self._race_matters(b, point, here.output)
                        if not matters:
                            unread.append(b)
                    else:
                        outs = [_h(next(runs).output) for _ in scans[b.id]]
                        matters = any(o != _h(here.output) for o in outs)
                    if matters:
                        node = self._split(b, point, here)
                        node.point = dict(point)
                        return node
            i = len(self.layout.blocks)
        if unread:
            raise unread_race(unread[0])
        return Node("leaf", output=here.output, point=dict(point))

    def _early(self, point: Assign) -> Block | None:
        """Where a draw is a long race (``long_race``): the block to split before the draw order's,
        so that a long race is fixed above the cells where the output does not read it (there,
        showing that it does not matter takes a run per token: ``unread_race``). In draw order, the
        first categorical draw that changes the output at ``point`` or with every free uniform
        at 0 or at its top (a race's weights follow the draft tokens: they are split first),
        else the first long race that changes the output at one of those two ends and is not
        shown to at the other (a recovered token's race, read where a draft is rejected). None:
        no such block, or no long race."""
        if not any(long_race(b) for b in self.layout.blocks):
            return None
        for b in self.layout.blocks:
            if b.id in point or b.kind == "u":
                continue
            ends = self.free_ends(point, (b.id,))
            if b.kind == "cat":
                for at in [point, *({**point, **ctx} for ctx in ends)]:
                    base = self.eval([at])[0]
                    if any(_h(r.output) != _h(base.output) for r in self.eval(self._scan_points(b, at, base.weights))):
                        return b
            elif long_race(b) and ends:
                ats = [{**point, **ctx} for ctx in ends]
                seen = [self._race_matters(b, at, self.eval([at])[0].output) for at in ats]
                if seen[0] != seen[1]:
                    return b
        return None

    def _race_matters(self, b: Block, point: Assign, output: Any) -> bool:
        """Whether group tests find a token of the long race ``b`` whose win alone (E = DELTA,
        the rest at 1) changes ``output``, the output at ``point`` (``_group_search``: a change
        seen is a change; none found is not shown to be none: ``unread_race``)."""
        v = RaceView((b,), "exp")
        return bool(self._group_search(v, point, [([1.0] * b.size, output)], list(range(b.size)), first=True))

    def _split(self, b: Block, point: Assign, here: Run) -> Node:
        if b.kind == "race":
            return self._split_race(RaceView((b,), "exp"), point)
        if b.kind == "cat":
            return self._split_cat(b, point, here)
        cells = self._uniform_cells(b, point)
        siblings = [self.layout.blocks[s] for s in b.row if s != b.id]
        if siblings and all(s.id not in point for s in siblings) and self._coupled(b, siblings, point, cells):
            return self._row_race(b, point)
        node = Node("u", (b.id,), grid=b.grid)
        for a, c in cells:
            # the cell's two ends, but never u = 0 itself: there `u <= p` holds even where p = 0 (a zero-
            # probability token accepted), an event of mass 2^-grid the ideal law (u continuous) leaves out
            ends = {max(a, 1), c - 1}
            alts = [{b.id: x} for x in sorted(ends) if a <= x < c and x != a + (c - a - 1) // 2]
            node.parts.append(Part((c - a) / 2.0**b.grid, {b.id: a + (c - a - 1) // 2}, alts, (a, c)))
        return node

    def _coupled(self, b: Block, siblings: list[Block], point: Assign, cells: list[tuple[int, int]]) -> bool:
        """Whether the cuts of uniform ``b`` move when another uniform of its row goes to 0 or
        to its top: the row is then read as a race, not as independent uniforms."""
        for s in siblings:
            for end in (0, (1 << s.grid) - 1):
                if self._uniform_cells(b, {**point, s.id: end}) != cells:
                    return True
        return False

    def _row_race(self, b: Block, point: Assign) -> Node:
        """A row of uniforms whose elements compete: read as an exponential race over
        E = -log u (or -log(1 - u), for code that uses 1 - u), refused naming the row where it
        is neither."""
        row = tuple(self.layout.blocks[i] for i in b.row)
        first: Unsupported | None = None
        for how in ("log", "log1p"):
            try:
                return self._split_race(RaceView(row, how), point)
            except ScheduleChanged:  # not a question of how the row is read: every reading meets it
                raise
            except Unsupported as e:
                first = first or e
        assert first is not None
        raise first

    def _uniform_cells(self, b: Block, point: dict[int, Any]) -> list[tuple[int, int]]:
        """The cells of uniform ``b`` at ``point``: grid intervals [a, c) split where the
        output changes, each cut found by bisection. Cuts this block had at other points are
        tried first (two answers confirm one), and the midpoints are float32 values while
        there are any in between, then the grid neighbours of the two float32 ends (a
        threshold computed in float32 puts the cut there): a few answers instead of 53 where
        that holds."""
        top = (1 << b.grid) - 1
        scale = 2.0**b.grid
        seen = self.cuts.setdefault(b.id, [])

        def mid(a: int, c: int) -> list[int]:
            m = (a + c) // 2
            if b.grid > 24:
                k = int(float(np.float32(m / scale)) * scale)
                if a < k < c:
                    return [k]
                if int(float(np.float32(a / scale)) * scale) == a and c - a > 2:  # no float32 between: its neighbours
                    return [a + 1, c - 1]
            return [m]

        known = {0: None, top: None}
        for k, r in zip(known, self.eval([{**point, b.id: k} for k in known])):
            known[k] = r.output
        pending = [(0, top)] if _h(known[0]) != _h(known[top]) else []
        tried: set[tuple[int, int]] = set()
        while pending:
            asks: list[int] = []
            for a, c in pending:
                guesses = [g for g in seen if a < g <= c and (a, c) not in tried]
                tried.add((a, c))
                if guesses:
                    asks += [x for g in guesses[-4:] for x in (g - 1, g) if a < x < c or x == g]
                    continue
                per = max(1, (self.width - 1) // len(pending))
                if per == 1:
                    asks += mid(a, c)
                else:
                    n = min(per, c - a - 1)
                    asks += [a + (c - a) * (j + 1) // (n + 1) for j in range(n)]
            asks = sorted(set(asks) - set(known))
            for k, r in zip(asks, self.eval([{**point, b.id: k} for k in asks])):
                known[k] = r.output
            nxt = []
            for a, c in pending:
                inside = sorted(k for k in known if a <= k <= c)
                for x, y in zip(inside, inside[1:]):
                    if _h(known[x]) != _h(known[y]) and y - x > 1:
                        nxt.append((x, y))
            pending = nxt
        keys = sorted(known)
        cuts = [0] + [y for x, y in zip(keys, keys[1:]) if _h(known[x]) != _h(known[y])] + [top + 1]
        for c in cuts[1:-1]:
            if c not in seen:
                seen.append(c)
        return list(zip(cuts, cuts[1:]))

    # races

    def _keys(self, ids: tuple[int, ...], point: Assign, points: list[Assign], outs: list[Any]) -> list[Hashable]:
        """What tells the options of a block apart: their outputs at ``point`` (``outs``, the
        option's values in ``points``) and in two more contexts, every uniform not yet fixed
        at 0 and at its top. Two options with the same output here may differ further on (a
        draft token rejected here may be accepted at another uniform): they share a part only
        if they agree in all three."""
        keys = [[_h(o)] for o in outs]
        for ctx in self.free_ends(point, ids) or [{}, {}]:
            mine = [{k: x for k, x in p.items() if k in ids} for p in points]
            for key, run in zip(keys, self.eval([{**point, **ctx, **m} for m in mine])):
                key.append(_h(run.output))
        return [tuple(k) for k in keys]

    def _split_cat(self, b: Block, point: dict[int, Any], here: Run) -> Node:
        w = list(b.weights or here.weights.get(b.id) or [])
        opts = [j for j in range(len(w)) if w[j] > 0]
        points = [{**point, b.id: j} for j in opts]
        outs = [r.output for r in self.eval(points)]
        total = sum(w[j] for j in opts)
        groups: dict[Hashable, list[int]] = {}
        keys = self._keys((b.id,), point, points, outs) if (b.id,) not in self.finer else opts
        for j, key in zip(opts, keys):
            groups.setdefault(key, []).append(j)
        node = Node("cat", (b.id,), weights=w)
        for members in groups.values():
            alts = [{b.id: j} for j in members[1:]]
            node.parts.append(Part(sum(w[m] for m in members) / total, {b.id: members[0]}, alts, members))
        return node

    # the tree, the product check, the law

    def build(self, point: Assign) -> Node:
        """The tree of cells below ``point`` (the blocks it holds fixed)."""
        node = self.local(point)
        for part in node.parts:
            part.child = self.build({**point, **part.assign})
        return node

    def check_product(self, root: Node) -> None:
        """Show that every leaf's cell is the product of its path's cells, before its weight
        counts: each node is rebuilt (``local``) with each block above it moved to the other
        values of its own cell (a uniform to its cell's two ends; a race to the near-tie
        corner of its order, the rest of the order reversed, its zero-weight values moved,
        and the other orders of its part; a categorical to the other options of its part),
        and must come out the same: the same cuts, weights and cells, or the same output.

        Where the block above is a categorical or a race whose split was coarser than it can
        be, the split is made finer for that draw from now on and ``Finer`` is raised (the
        caller builds the tree again): a categorical's options each a part of their own
        (options that agree in the three contexts ``_keys`` tries may still differ in a cell
        of another draw none of them reaches, as a zero-target draft accepted at u = 0); a
        race's order prefixes each a part of their own, then one place longer (the prefix
        length was read at one point, and a later draw may read more of the order elsewhere:
        a rejected first child makes the second one count). A finer split is as exact, only
        longer. Raises Unsupported naming both draws where a node does not come out the
        same and the split above cannot be made finer."""
        stack: list[tuple[Node, list[tuple[Node, Part]]]] = [(root, [])]
        while stack:
            node, path = stack.pop()
            moved = self._moved_apart(node, path)
            if moved is None:
                for part in node.parts:
                    assert part.child is not None
                    stack.append((part.child, [*path, (node, part)]))
                continue
            above, _ = moved
            if not self._refine(above):
                raise self._not_product(node, above)
            raise Finer(above.blocks)

    def _refine(self, node: Node) -> bool:
        """Make the split of ``node``'s draw finer from now on (``finer``); False where it is
        as fine as it gets (a uniform; every option, or every whole order, a part)."""
        if node.kind == "cat":
            if all(len(p.cell) == 1 for p in node.parts):
                return False
            self.finer[node.blocks] = 1
            return True
        if node.kind != "race":
            return False
        live = sum(1 for x in node.weights or [] if x > 0)
        grouped = any(len(p.cell) > 1 for p in node.parts)
        if not grouped and node.prefix >= live - 1:
            return False
        self.finer[node.blocks] = node.prefix if grouped else node.prefix + 1
        return True

    def _moved_apart(self, node: Node, path: list[tuple[Node, Part]]) -> tuple[Node, Part] | None:
        """The first (node above, its part) on ``path`` whose block, moved to another value of
        the part, rebuilds ``node`` otherwise; None where every move gives the same node."""
        for above, part in path:
            for alt in part.alts:
                self.checked += 1
                self.hint = node.hints
                try:
                    other = self.local({**node.point, **alt})
                finally:
                    self.hint = {}
                if not _same(node, other):
                    return above, part
        return None

    def _name(self, node: Node) -> str:
        b = self.layout.blocks[node.blocks[0]]
        return b.name() + (f" (a row of {len(node.blocks)} as a race)" if len(node.blocks) > 1 else "")

    def _not_product(self, node: Node, above: Node) -> Unsupported:
        what = "its output" if node.kind == "leaf" else f"the cells of {self._name(node)}"
        return Unsupported(
            f"{self._name(above)}: {what} change where this draw moves inside one of its cells: the draws are "
            "not independent steps (their cells are no product), so the enumeration is not exact; exact "
            "certification cannot follow it"
        )

    def leaves(self, node: Node, prob: float = 1.0) -> list[tuple[float, Any]]:
        if node.kind == "leaf":
            return [(prob, node.output)]
        out = []
        for part in node.parts:
            assert part.child is not None
            out += self.leaves(part.child, prob * part.prob)
        return out

    def witness(self, node: Node, steps: list[dict] | None = None) -> list[dict]:
        """What the law was computed from: each leaf's output and the cell of each draw on
        its path (``rheo.checks.witness`` recomputes the law from this alone)."""
        steps = steps or []
        if node.kind == "leaf":
            return [{"steps": steps, "output": _plain(node.output)}]
        out: list[dict] = []
        for part in node.parts:
            assert part.child is not None
            out += self.witness(part.child, [*steps, self._step(node, part)])
        return out

    def _step(self, node: Node, part: Part) -> dict:
        draw = self._name(node)
        if node.kind == "u":
            return {"draw": draw, "kind": "uniform", "grid_bits": node.grid, "cell": list(part.cell)}
        if node.kind == "race":
            return {"draw": draw, "kind": "race", "weights": node.weights, "orders": part.cell, "values": node.how}
        return {"draw": draw, "kind": "categorical", "weights": node.weights, "options": part.cell}

    # the probes

    def _locate(self, node: Node, point: Assign) -> Node:
        """Fill ``point`` with random values for the blocks ``node``'s path splits, and return
        the leaf whose cell holds them."""
        rng = self.rng
        while node.kind != "leaf":
            if node.kind == "u":
                b = self.layout.blocks[node.blocks[0]]
                k = int(rng.integers(1 << b.grid))
                point[b.id] = k
                i = next(i for i, p in enumerate(node.parts) if p.cell[0] <= k < p.cell[1])
            elif node.kind == "race":
                v = RaceView(tuple(self.layout.blocks[j] for j in node.blocks), node.how)
                if v.how == "exp":
                    point.update(v.assign([float(x) for x in rng.exponential(size=v.size)]))
                else:
                    for b in v.blocks:
                        point[b.id] = int(rng.integers(1, 1 << b.grid))
                E, w = v.exps(point), node.weights or []
                order = sorted((j for j in range(v.size) if w[j] > 0), key=lambda j: -w[j] / E[j])
                pre = order[: node.prefix]
                i = next(i for i, p in enumerate(node.parts) if pre in p.cell)
            else:
                b = self.layout.blocks[node.blocks[0]]
                cw = np.asarray(node.weights or [], dtype=float)
                j = int(rng.choice(len(cw), p=cw / cw.sum()))
                point[b.id] = j
                i = next(i for i, p in enumerate(node.parts) if j in p.cell)
            child = node.parts[i].child
            assert child is not None
            node = child
        return node

    def probe(self, root: Node, count: int) -> None:
        """``count`` random points (every block random, the uncontrolled seeds scrambled),
        each checked against its leaf's output; a miss is traced to its draw and refused."""
        probes = []
        for _ in range(count):
            point: dict[int, Any] = {}
            leaf = self._locate(root, point)
            for b in self.layout.blocks:  # the blocks no split fixed: random too
                if b.id not in point:
                    if b.kind == "u":
                        point[b.id] = int(self.rng.integers(1 << b.grid))
                    elif b.kind == "race":
                        point[b.id] = tuple(float(x) for x in self.rng.exponential(size=b.size))
                    else:
                        point[b.id] = int(self.rng.integers(b.size))
            probes.append((point, leaf))
        runs = []
        saved = (_random.getstate(), np.random.get_state(), torch.random.get_rng_state())
        try:
            for point, _ in probes:  # one at a time, each with the uncontrolled seeds scrambled
                _scramble(int(self.rng.integers(2**31)))
                runs += self.eval([point], fresh=True)
        finally:  # the process's own random state is left as it was
            _random.setstate(saved[0])
            np.random.set_state(saved[1])
            torch.random.set_rng_state(saved[2])
        for (point, leaf), run in zip(probes, runs):
            if _h(run.output) != _h(leaf.output):
                raise self._culprit(point, leaf)

    def _culprit(self, point: dict[int, Any], leaf: Node) -> Unsupported:
        """The first block, in draw order, whose probe value alone (the leaf's point otherwise)
        changes the leaf's output."""
        base = dict(leaf.point)
        for b in self.layout.blocks:
            if b.id not in point:
                continue
            trial = {**base, b.id: point[b.id]}
            if _h(self.eval([trial])[0].output) != _h(leaf.output):
                return Unsupported(
                    f"{b.name()}: a random probe gave another output than its cell's: the output is not a step "
                    "function of this draw (or a race of it) that exact certification can follow"
                )
            base = trial
        return Unsupported(
            "a random probe with scrambled seeds gave another output than its cell's: the implementation uses "
            "randomness exact certification does not intercept (Python's random, NumPy, a C extension's own)"
        )


def _scramble(seed: int) -> None:
    _random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.random.default_generator.manual_seed(seed)


def _width(law: ConcreteLaw) -> int:
    """How many points per interval and round a bisection asks for in one call: the count
    that costs least per bit of the cut, from the time of a call of one point and of eight
    (a batched engine on a CPU pays per row, on a GPU per call)."""

    def timed(n: int) -> float:
        pts = [{-1: i} for i in range(n)]  # block -1 does not exist: the default values, n rows
        t0 = time.perf_counter()
        law.eval(pts, fresh=True)
        return time.perf_counter() - t0

    one, eight = timed(1), timed(8)
    if law.batch == 1:  # the engine did not take the rows
        return 1
    per_row = max(0.0, (eight - one) / 7)
    fixed = max(1e-9, one - per_row)
    best = min((1, 3, 7, 15, 31, 63), key=lambda r: (fixed + per_row * r) / math.log2(r + 1))
    return min(best, law.batch)


def concrete_law(
    call: Callable[[], Any],
    call_rows: Callable[[int], list[Any]] | None,
    max_runs: int,
    probes: int,
    seed: int,
    batch: int = 64,
    witness: list[dict] | None = None,
) -> tuple[list[tuple[float, Any]], int, int]:
    """(leaves (probability, output), runs, lowest float bits of a draw) of ``call``, whose
    torch draws get concrete values (the module docstring). ``call_rows(rows)``, when given,
    runs ``rows`` copies in one batch (row r's draws the r-th slice of each draw along dim
    0). Raises Unsupported with one line naming the draw it cannot follow (or the two draws
    whose cells are no product), and RunCap (from ``rheo.checks.exact.tracer``) past
    ``max_runs`` evaluations. ``witness``, when given, receives each leaf's cells and output
    (``ConcreteLaw.witness``)."""
    layout = Layout()
    runs = [0]
    state = {"rows": call_rows is not None}
    budget.part()

    def tick(n: int) -> None:
        runs[0] += n
        budget.tick(n=n)
        if runs[0] > max_runs:
            raise RunCap(max_runs)

    def single(point: dict[int, Any]) -> Run:
        tick(1)
        mode = ConcreteMode(layout, [point], 1)
        with mode:
            out = call()
        if mode.n != len(layout.draws):
            raise ScheduleChanged(
                f"the number of draws changes with the values drawn ({mode.n} on one run, {len(layout.draws)} before): "
                f"{SCHEDULE_NEEDED}"
            )
        return Run(out, mode.weights[0])

    def evaluate(points: list[dict[int, Any]]) -> list[Run]:
        if state["rows"] and call_rows is not None and len(points) > 1 and layout.draws:
            mode = ConcreteMode(layout, points, len(points))
            try:
                tick(len(points))
                with mode:
                    outs = call_rows(len(points))
                if mode.n == len(layout.draws) and len(outs) == len(points):
                    return [Run(o, w) for o, w in zip(outs, mode.weights)]
            except NotRowwise:
                pass
            state["rows"] = False  # not row by row: one point per call from now on
        return [single(p) for p in points]

    rng = np.random.default_rng(seed)
    law = ConcreteLaw(evaluate, layout, batch if call_rows is not None else 1, rng)
    law.eval([{}])
    if not state["rows"]:
        law.batch = 1
    law.width = _width(law) if law.batch > 1 else 1
    while True:  # the proof that the leaves' cells are products, before any weight counts
        root = law.build({})
        try:
            law.check_product(root)
            break
        except Finer:  # a split made finer: the tree again (the evaluations are remembered)
            continue
    if not state["rows"]:
        law.batch = 1
    law.probe(root, probes)  # the second line: random points land in their leaves
    bits = min((b.grid for b in layout.blocks if b.kind != "cat"), default=53)
    if witness is not None:
        witness.extend(law.witness(root))
    return law.leaves(root), runs[0], bits
