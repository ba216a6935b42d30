"""Exact certification through code the symbolic tracer cannot follow: Triton or C++ kernels,
in-place operations, ``.item()`` / ``float()`` (docs/gate.md, "Concrete draws").

Every torch draw gets *concrete* values chosen by the enumerator instead of symbolic ones, and
the output's dependence on them is found from the outside, one *block* at a time:

- a **uniform** (``torch.rand``, ``rand_like``, ``Tensor.uniform_``; one block per element):
  the output is taken to be a step function of it, each output on one interval; the cuts are
  found by bisection on the generator's own grid (k / 2^24 for float32, k / 2^53 for float64),
  each cell weighted by its length;
- an **exponential race** (``Tensor.exponential_``; one block per row of the last dimension):
  the output is taken to depend on the row only through ``argmax_k w_k / E_k`` for unknown
  weights w. The weights are recovered by bisecting one exponential at a time with the others
  fixed (the cut where token j takes over from the leader is w_j / w_leader), and the race's
  known law P(k) = w_k / sum(w) is used;
- a **categorical** draw (``torch.multinomial``, ``bernoulli``, a small-range ``randint``): its
  options are enumerated with their weights.

A block is resolved only where it matters: at each node of the enumeration the first block, in
draw order, whose value changes the output (the others at their current values) is split, each
part fixed at a representative value, and the enumeration goes on below it; a node where no
block matters is a leaf. That is exact while the cells of each block do not depend on where the
earlier blocks fell inside theirs, which holds for uniforms compared with thresholds and for
races decided by an argmax. Random probes check it: whole random points, each located in the
tree of cells, must give their leaf's output; a probe that does not is traced to the first
block whose value alone changes the answer, and that draw is refused with one line naming it
and its file:line. A ``randint`` over a range too wide to enumerate (one that seeds another
generator) is refused with a line saying how to avoid it.

An implementation with ``cycle_batch(draft_logits, target_logits, config, temperature, rows)``
(rows copies of the request in one engine batch, row r's draws the r-th equal slice along dim
0 of every draw) has many points evaluated per call: a bisection then costs a few calls.

Specification: docs/spec.md §5 (the law judged), §7.
"""

from __future__ import annotations

import functools
import math
import random as _random
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rheo.checks.exact.concrete_mode import DELTA, Block, ConcreteMode, Layout, NotRowwise, Run
from rheo.checks.exact.random_values import Unsupported
from rheo.checks.exact.tracer import RunCap

# ---- float bit patterns (bisection over the floats of a dtype) ----


def _to_bits(x: float, grid: int) -> int:
    if grid <= 24:
        return int(np.array(x, dtype=np.float32).view(np.int32))
    return int(np.array(x, dtype=np.float64).view(np.int64))


def _from_bits(i: int, grid: int) -> float:
    if grid <= 24:
        return float(np.array(i, dtype=np.int32).view(np.float32))
    return float(np.array(i, dtype=np.int64).view(np.float64))


# ---- the enumeration ----


Evaluate = Callable[[list[dict[int, Any]]], list[Run]]


@dataclass
class Node:
    """A split of one block at a point (its parts, each a (probability, value, child)), or a
    leaf (``output``)."""

    block: int | None
    parts: list[tuple[float, Any, Node]] = field(default_factory=list)
    race_weights: list[float] | None = None
    cat_weights: list[float] | None = None
    uniform_cuts: list[tuple[int, int]] | None = None  # per part: grid interval [a, b)
    groups: list[list[int]] | None = None  # race / cat: the options of each part
    output: Any = None
    point: dict[int, Any] = field(default_factory=dict)


class ConcreteLaw:
    """The exact law of ``evaluate``'s output over its draws (see the module docstring).

    ``evaluate(points) -> runs`` runs the implementation once per point (or once for all,
    batched) under a ``ConcreteMode``; ``batch`` is how many points one call may take."""

    def __init__(self, evaluate: Evaluate, layout: Layout, batch: int, rng: np.random.Generator) -> None:
        self.evaluate_raw, self.layout, self.batch, self.rng = evaluate, layout, max(1, batch), rng
        self.width = self.batch  # points per interval and round of a bisection (``concrete_law`` sets it)
        self.memo: dict[tuple, Run] = {}
        self.cuts: dict[Any, list[int]] = {}  # per block (and race token): the cuts found so far, tried first

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

    # the parts of one block at a point

    def _scan_points(self, b: Block, point: dict[int, Any], weights: dict[int, list[float]]) -> list[dict]:
        if b.kind == "u":
            return [{**point, b.id: 0}, {**point, b.id: (1 << b.grid) - 1}]
        if b.kind == "race":
            return [{**point, b.id: _one_low(b.size, j, DELTA)} for j in range(b.size)]
        w = b.weights or weights.get(b.id) or []
        return [{**point, b.id: j} for j in range(len(w)) if w[j] > 0]

    def _value(self, b: Block, point: dict[int, Any], weights: dict[int, list[float]]) -> Any:
        if b.id in point:
            return point[b.id]
        if b.kind == "cat":
            w = b.weights or weights.get(b.id) or [1.0]
            return int(np.argmax(w))
        return b.default()

    def build(self, point: dict[int, Any], depth: int = 0) -> Node:
        """The tree of cells below ``point`` (the blocks it holds fixed)."""
        here = self.eval([point])[0]
        i = 0
        while i < len(self.layout.blocks):  # blocks appear as draws are made; scan in draw order
            unfixed = [b for b in self.layout.blocks[i:] if b.id not in point]
            if not unfixed:
                break
            # every block's answers in one call where rows are cheap; else one block at a time, stopping
            # at the first that matters
            groups = [unfixed] if self.width > 1 else [[b] for b in unfixed]
            for group in groups:
                scans = [(b, self._scan_points(b, point, here.weights)) for b in group]
                runs = self.eval([p for _, ps in scans for p in ps])
                k = 0
                for b, ps in scans:
                    outs = [_h(r.output) for r in runs[k : k + len(ps)]]
                    k += len(ps)
                    if any(o != _h(here.output) for o in outs):
                        return self._split(b, {**point, b.id: self._value(b, point, here.weights)}, here, depth)
            i = len(self.layout.blocks)
        return Node(None, output=here.output, point=dict(point))

    def _split(self, b: Block, point: dict[int, Any], here: Run, depth: int) -> Node:
        if b.kind == "u":
            node = self._split_uniform(b, point)
        elif b.kind == "race":
            node = self._split_race(b, point)
        else:
            node = self._split_cat(b, point, here)
        node.point = dict(point)
        node.parts = [(p, v, self.build({**point, b.id: v}, depth + 1)) for p, v, _ in node.parts]
        return node

    def _split_uniform(self, b: Block, point: dict[int, Any]) -> Node:
        """The cells of uniform ``b`` at ``point``: the grid indices where the output changes,
        each found by bisection. Cuts this block had at other points are tried first (two
        answers confirm one), and the midpoints are float32 values while there are any in
        between, then the grid neighbours of the two float32 ends (a threshold computed in
        float32 puts the cut there): a few answers instead of 53 where that holds."""
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
        node = Node(b.id, uniform_cuts=[])
        for a, c in zip(cuts, cuts[1:]):
            node.parts.append(((c - a) / scale, a + (c - a - 1) // 2, node))
            assert node.uniform_cuts is not None
            node.uniform_cuts.append((a, c))
        return node

    def _split_race(self, b: Block, point: dict[int, Any]) -> Node:
        V = b.size

        def at(j: int, E: float, base: tuple[float, ...] | None = None) -> dict:
            row = list(base or (1.0,) * V)
            row[j] = E
            return {**point, b.id: tuple(row)}

        base_out = self.eval([at(0, 1.0)])[0].output
        low = [r.output for r in self.eval([at(j, DELTA) for j in range(V)])]
        others = [j for j in range(V) if _h(low[j]) != _h(base_out)]
        w = [0.0] * V
        alone: list[Callable[[float], dict]] = [functools.partial(at, j) for j in others]
        for j, c in zip(others, self._cuts_race(alone, b, base_out, [(b.id, "alone", j) for j in others])):
            w[j] = c
        lead = max(others, key=lambda j: w[j])
        if w[lead] <= 0:
            raise self._not_race(b, "a token that wins alone has no weight")
        lead_row = list((1.0,) * V)
        lead_row[lead] = w[lead] / 4  # the lead's score: 4 (every weight is at most the leader's, 1)
        same = [j for j in range(V) if j not in others]
        lead_out = low[lead]
        against: list[Callable[[float], dict]] = [
            functools.partial(lambda j, E: at(j, E, tuple(lead_row)), j) for j in same
        ]
        cuts = self._cuts_race(against, b, lead_out, [(b.id, "against", lead, j) for j in same], ends=True)
        for j, c in zip(same, cuts):
            w[j] = 4 * c
        total = sum(w)
        live = [j for j in range(V) if w[j] > 0]
        keys = self._keys(b, point, [_one_low(V, j, w[j] / 2) for j in live], [low[j] for j in live])
        groups: dict[Hashable, list[int]] = {}
        for j, key in zip(live, keys):
            groups.setdefault(key, []).append(j)
        node = Node(b.id, race_weights=w, groups=[])
        for members in groups.values():
            j = max(members, key=lambda m: w[m])
            node.parts.append((sum(w[m] for m in members) / total, _one_low(V, j, w[j] / 2), node))
            assert node.groups is not None
            node.groups.append(members)
        return node

    def _cuts_race(
        self, fns: list[Callable[[float], dict]], b: Block, far: Any, keys: list[Any], ends: bool = False
    ) -> list[float]:
        """For each fn: the least E in [DELTA, 1] (over the floats of the draw's dtype) at which
        fn(E)'s output is ``far`` (the output at E = 1); 0.0 when fn(DELTA) is already ``far``
        (``ends``: a token too light to win even at DELTA). The cuts found before under the same
        key (the block, the pass, the token) are tried first: two answers confirm one."""
        lo_bits, hi_bits = _to_bits(DELTA, b.grid), _to_bits(1.0, b.grid)
        state = [[lo_bits, hi_bits] for _ in fns]
        outs_lo = [r.output for r in self.eval([f(DELTA) for f in fns])]
        done = [False] * len(fns)
        res = [0.0] * len(fns)
        for i, o in enumerate(outs_lo):
            if _h(o) == _h(far):
                if not ends:
                    raise self._not_race(b, "an exponential's cut could not be found")
                done[i] = True
        first = True
        while not all(done):
            live = [i for i in range(len(fns)) if not done[i] and state[i][1] - state[i][0] > 1]
            if not live:
                break
            per = max(1, (self.width - 1) // len(live))
            asks: list[tuple[int, int]] = []
            for i in live:
                a, c = state[i]
                guesses = [g for g in self.cuts.get(keys[i], []) if a < g - 1 and g < c] if first else []
                if guesses:
                    asks += [(i, x) for g in guesses[-4:] for x in (g - 1, g)]
                    continue
                n = min(per, c - a - 1)
                asks += [(i, a + (c - a) * (j + 1) // (n + 1)) for j in range(n)]
            first = False
            runs = self.eval([fns[i](_from_bits(k, b.grid)) for i, k in asks])
            by: dict[int, list[tuple[int, Any]]] = {}
            for (i, k), r in zip(asks, runs):
                by.setdefault(i, []).append((k, r.output))
            for i, got in by.items():
                a, c = state[i]
                for k, o in sorted(got):
                    if _h(o) == _h(far):
                        c = k
                        break
                    if _h(o) != _h(outs_lo[i]):
                        raise self._not_race(b, "a third output appeared while one exponential moved")
                    a = k
                state[i] = [a, c]
            for i in live:
                if state[i][1] - state[i][0] <= 1:
                    done[i] = True
        for i in range(len(fns)):
            if res[i] == 0.0 and _h(outs_lo[i]) != _h(far):
                res[i] = _from_bits(state[i][1], b.grid)
                seen = self.cuts.setdefault(keys[i], [])
                if state[i][1] not in seen:
                    seen.append(state[i][1])
        return res

    def _not_race(self, b: Block, why: str) -> Unsupported:
        return Unsupported(
            f"{b.name()}: the output does not depend on the row of exponentials as an exponential race "
            f"argmax(w / E) ({why}); exact certification cannot follow it"
        )

    def _keys(self, b: Block, point: dict[int, Any], values: list[Any], outs: list[Any]) -> list[Hashable]:
        """What tells the options of block ``b`` apart: their outputs at ``point`` (``outs``)
        and in two more contexts, every uniform not yet fixed at 0 and at its top. Two options
        with the same output here may differ further on (a draft token rejected here may be
        accepted at another uniform): they share a part only if they agree in all three."""
        free = [u for u in self.layout.blocks if u.kind == "u" and u.id not in point and u.id != b.id]
        keys = [[_h(o)] for o in outs]
        for ends in ("low", "top"):
            ctx = {u.id: 0 if ends == "low" else (1 << u.grid) - 1 for u in free}
            for key, run in zip(keys, self.eval([{**point, **ctx, b.id: v} for v in values])):
                key.append(_h(run.output))
        return [tuple(k) for k in keys]

    def _split_cat(self, b: Block, point: dict[int, Any], here: Run) -> Node:
        w = list(b.weights or here.weights.get(b.id) or [])
        opts = [j for j in range(len(w)) if w[j] > 0]
        outs = [r.output for r in self.eval([{**point, b.id: j} for j in opts])]
        total = sum(w[j] for j in opts)
        groups: dict[Hashable, list[int]] = {}
        for j, key in zip(opts, self._keys(b, point, opts, outs)):
            groups.setdefault(key, []).append(j)
        node = Node(b.id, cat_weights=w, groups=[])
        for members in groups.values():
            node.parts.append((sum(w[m] for m in members) / total, members[0], node))
            assert node.groups is not None
            node.groups.append(members)
        return node

    # the law, and the probes

    def leaves(self, node: Node, prob: float = 1.0) -> list[tuple[float, Any]]:
        if node.block is None:
            return [(prob, node.output)]
        out = []
        for p, _, child in node.parts:
            out += self.leaves(child, prob * p)
        return out

    def _locate(self, node: Node, point: dict[int, Any]) -> Node:
        """Fill ``point`` with random values for the blocks ``node``'s path splits, and return
        the leaf whose cell holds them."""
        rng = self.rng
        while node.block is not None:
            b = self.layout.blocks[node.block]
            if b.kind == "u":
                k = int(rng.integers(1 << b.grid))
                point[b.id] = k
                i = next(i for i, (a, c) in enumerate(node.uniform_cuts or []) if a <= k < c)
            elif b.kind == "race":
                E = tuple(float(x) for x in rng.exponential(size=b.size))
                point[b.id] = E
                w = node.race_weights or []
                win = int(np.argmax([w[j] / E[j] for j in range(b.size)]))
                i = next(i for i, g in enumerate(node.groups or []) if win in g)
            else:
                cw = np.asarray(node.cat_weights or [], dtype=float)
                j = int(rng.choice(len(cw), p=cw / cw.sum()))
                point[b.id] = j
                i = next(i for i, g in enumerate(node.groups or []) if j in g)
            node = node.parts[i][2]
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


def _one_low(V: int, j: int, E: float) -> tuple[float, ...]:
    row = [1.0] * V
    row[j] = E
    return tuple(row)


def _h(x: Any) -> Any:
    """A hashable, comparable form of an output."""
    if isinstance(x, dict):
        return tuple(sorted((k, _h(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return tuple(_h(v) for v in x)
    if isinstance(x, np.ndarray):
        return tuple(x.reshape(-1).tolist())
    return x


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
) -> tuple[list[tuple[float, Any]], int, int]:
    """(leaves (probability, output), runs, lowest float bits of a draw) of ``call``, whose
    torch draws get concrete values (the module docstring). ``call_rows(rows)``, when given,
    runs ``rows`` copies in one batch (row r's draws the r-th slice of each draw along dim
    0). Raises Unsupported with one line naming the draw it cannot follow, and RunCap (from
    ``rheo.checks.exact.tracer``) past ``max_runs`` evaluations."""
    layout = Layout()
    runs = [0]
    state = {"rows": call_rows is not None}

    def tick(n: int) -> None:
        runs[0] += n
        if runs[0] > max_runs:
            raise RunCap(max_runs)

    def single(point: dict[int, Any]) -> Run:
        tick(1)
        mode = ConcreteMode(layout, [point], 1)
        with mode:
            out = call()
        if mode.n != len(layout.draws):
            raise Unsupported(
                f"the number of draws changes with the values drawn ({mode.n} on one run, {len(layout.draws)} before): "
                "exact certification needs the same draws on every run"
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
    root = law.build({})
    if not state["rows"]:
        law.batch = 1
    law.probe(root, probes)
    bits = min((b.grid for b in layout.blocks if b.kind != "cat"), default=53)
    return law.leaves(root), runs[0], bits
