"""The cells of a concrete enumeration (``rheo.checks.exact.concrete``) and its races: a row
of exponentials, or a row of uniforms whose elements compete, read as an exponential race
argmax or order of w / E. The weights are recovered by bisection (the cut where token j takes
over from the leader is w_j / w_leader), checked once per draw at a second scale of E, and
the order prefixes the output depends on are enumerated with their Plackett-Luce law
(docs/gate.md, "Races over uniforms").

Specification: docs/spec.md §7.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rheo.checks.exact.concrete_mode import DELTA, Block, Run, dense, race_row
from rheo.checks.exact.random_values import Unsupported

Assign = dict[int, Any]


def _to_bits(x: float, grid: int) -> int:
    if grid <= 24:
        return int(np.array(x, dtype=np.float32).view(np.int32))
    return int(np.array(x, dtype=np.float64).view(np.int64))


def _from_bits(i: int, grid: int) -> float:
    if grid <= 24:
        return float(np.array(i, dtype=np.int32).view(np.float32))
    return float(np.array(i, dtype=np.int64).view(np.float64))


RACE_ORDERS = 5040  # ordered prefixes of one race enumerated at most (7! = every order of 7 tokens)
NEAR_TIE = 1.01  # the score ratio of neighbours in a race cell's near-tie corner
SPREAD = 2.0  # the score ratio of neighbours at a race cell's representative
GROUP_FROM = 256  # a race over more tokens has the tokens that can win found by group tests, not one by one
FIRST_GROUPS = 16  # the most groups of one level ``_group_search`` halves while looking for a first token


@dataclass
class Part:
    """One cell of a split: its probability, the values that stand for it (``assign``), other
    values inside the same cell (``alts``: where the product check moves it), and what the
    cell is (``cell``: a uniform's grid interval [a, c), a race's order prefixes, a
    categorical's options)."""

    prob: float
    assign: Assign
    alts: list[Assign]
    cell: Any
    child: Node | None = None


@dataclass
class Node:
    """A split of one block (a race over a row of uniforms: the row) into cells, or a leaf
    (``output``). ``point``: the values fixed above it."""

    kind: str  # "leaf" | "u" | "race" | "cat"
    blocks: tuple[int, ...] = ()
    parts: list[Part] = field(default_factory=list)
    output: Any = None
    point: Assign = field(default_factory=dict)
    weights: list[float] | None = None  # race, cat
    how: str = ""  # race: "exp" (a row of exponentials), "log" (uniforms, u = e^-E) or "log1p" (u = 1 - e^-E)
    prefix: int = 0  # race: how many leading places of the order the output depends on
    hints: dict[Any, int] = field(default_factory=dict)  # race: its weights' cuts (the product check tries them first)
    grid: int = 53  # u: the generator's grid, in bits


@dataclass(frozen=True)
class RaceView:
    """A race's values as a row of exponentials E (score w_j / E_j, highest first): a row of
    ``exponential_`` itself (how "exp"), or a row of uniforms u_j = e^-E_j ("log": Gumbel keys
    ``log w - log(-log u)``, ``u^(1/w)``, ``-log(u) / w``) or u_j = 1 - e^-E_j ("log1p")."""

    blocks: tuple[Block, ...]
    how: str

    @property
    def size(self) -> int:
        return self.blocks[0].size if self.how == "exp" else len(self.blocks)

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(b.id for b in self.blocks)

    def name(self) -> str:
        b = self.blocks[0]
        return b.name() if self.how == "exp" else f"{b.what} at {b.site} (a row of {len(self.blocks)} as a race)"

    def assign(self, E: Any) -> Assign:
        if self.how == "exp":
            return {self.blocks[0].id: race_row(E)}
        out: Assign = {}
        for b, e in zip(self.blocks, E):
            u = math.exp(-e) if self.how == "log" else -math.expm1(-e)
            out[b.id] = min((1 << b.grid) - 1, max(1, round(u * 2.0**b.grid)))
        return out

    def exps(self, point: Assign) -> list[float]:
        """The row's E at ``point`` (+inf where a uniform is 0 or 1)."""
        if self.how == "exp":
            b = self.blocks[0]
            return dense(point.get(b.id, b.default())).tolist()
        out = []
        for b in self.blocks:
            u = b.u(point.get(b.id, b.default()))
            with np.errstate(divide="ignore"):
                out.append(float(-np.log(u) if self.how == "log" else -np.log1p(-u)))
        return out

    def finest(self) -> float:
        """The least E whose order against its neighbours at ``NEAR_TIE`` the row's values still
        resolve (u's grid is absolute, so a uniform near 1 carries few digits of E)."""
        if self.how == "exp":
            return 1e-300
        return 1000 * 2.0 ** -min(b.grid for b in self.blocks)


def _plackett_luce(w: list[float], order: tuple[int, ...]) -> float:
    """P(the race's first places are ``order``): ordered draws without replacement, each
    token with probability w_j / (the weight not yet drawn)."""
    left, p = sum(w), 1.0
    for j in order:
        p *= w[j] / left
        left -= w[j]
    return p


class RaceSplits:
    """The race splits of ``ConcreteLaw`` (its evaluation, cut memory and grouping)."""

    width: int
    cuts: dict[Any, list[int]]
    scaled: set[tuple[tuple[int, ...], str]]
    found: dict[Any, int]
    hint: dict[Any, int]
    finer: dict[tuple[int, ...], int]
    lanes: dict[tuple[int, ...], set[int]]
    layout: Any  # concrete_mode.Layout: the draws and their blocks

    def eval(self, points: list[dict[int, Any]], fresh: bool = False) -> list[Run]:
        raise NotImplementedError

    def _keys(self, ids: tuple[int, ...], point: Assign, points: list[Assign], outs: list[Any]) -> list[Hashable]:
        raise NotImplementedError

    def _weights(self, v: RaceView, point: Assign, scale: float) -> list[float]:
        """The race's weights (its leader at every E = ``scale`` weighs 1): with every other
        E at ``scale``, the cut where token j takes over from the leader is E_j = scale w_j;
        the tokens that give the leader's output are measured the same way against a token
        of another output set to score 4."""
        V = v.size
        point, base_out, low, others, weighty = self._revealing(v, point, scale)

        def at(j: int, E: float, base: tuple[float, ...] | None = None) -> dict:
            row = list(base or (scale,) * V)
            row[j] = E
            return {**point, **v.assign(row)}

        if not others:
            raise self._not_race(v, "no token changes the output by winning")
        w = [0.0] * V
        alone: list[Callable[[float], dict]] = [functools.partial(at, j) for j in others]
        keys: list[tuple] = [(v.ids, v.how, scale, "alone", j) for j in others]
        for j, c in zip(others, self._cuts_race(alone, v, base_out, keys, hi=scale)):
            w[j] = c / scale
        lead = max(others, key=lambda j: w[j])
        if w[lead] <= 0:
            raise self._not_race(v, "a token that wins alone has no weight")
        lead_row = [scale] * V
        lead_row[lead] = scale * w[lead] / 4  # the lead's score: 4 (every weight is at most the leader's, 1)
        same = [j for j in (range(V) if weighty is None else weighty) if j not in others]
        against: list[Callable[[float], dict]] = [
            functools.partial(lambda j, E: at(j, E, tuple(lead_row)), j) for j in same
        ]
        keys = [(v.ids, v.how, scale, "against", lead, j) for j in same]
        for j, c in zip(same, self._cuts_race(against, v, low[lead], keys, ends=True, hi=scale)):
            w[j] = 4 * c / scale
        return w

    def free_ends(self, point: Assign, ids: tuple[int, ...]) -> list[Assign]:
        """The two contexts of a split besides ``point`` itself: every uniform that neither
        ``point`` nor the split's blocks ``ids`` fix, at 0 and at its top (none: [])."""
        free = [u for u in self.layout.blocks if u.kind == "u" and u.id not in point and u.id not in ids]
        if not free:
            return []
        return [{u.id: 0 for u in free}, {u.id: (1 << u.grid) - 1 for u in free}]

    def _revealing(
        self, v: RaceView, point: Assign, scale: float
    ) -> tuple[Assign, Any, dict[int, Any], list[int], list[int] | None]:
        """The context the race's weights are measured in: ``point`` as it is, or with every
        uniform it does not fix at 0, or at its top (``_keys``'s contexts), whichever tells
        the most tokens' wins apart (the output when each token wins, E = DELTA, against
        the output with every E at ``scale``: the leader's). A context where two tokens' wins
        give the same output hides their swap (a rejected first child, then the same token
        accepted either way), and a cut measured there is another pair's: the context in
        which the most tokens change it, each to an output of its own where that ties, is
        taken (the first of equals). (point with the context, the leader's output, each
        changing token's output, the tokens that change it, the tokens that may weigh
        anything: None for every token, or, past ``GROUP_FROM`` tokens, those the group
        tests of ``_weighty`` found)."""
        V = v.size
        contexts = [{}, *self.free_ends(point, v.ids)]
        best: tuple[Assign, Any, dict[int, Any], list[int], list[int] | None] | None = None
        best_score = (-1, False)
        for ctx in contexts:
            here = {**point, **ctx}
            long = V > GROUP_FROM
            found = self._weighty(v, here, scale) if long else None
            if found is not None:
                base_out, low, weighty = found
            elif long:  # no token found to change the output here: another context, or refused (not read whole)
                if best is not None or ctx is not contexts[-1]:
                    continue
                raise self._not_race(v, f"no token found whose win changes the output; a run per token is {V:,} runs")
            else:  # token by token
                rows = [{**here, **v.assign([scale] * V)}]
                for j in range(V):
                    row = [scale] * V
                    row[j] = DELTA
                    rows.append({**here, **v.assign(row)})
                outs = [r.output for r in self.eval(rows)]
                base_out, low, weighty = outs[0], dict(enumerate(outs[1:])), None
            others = [j for j in sorted(low) if _h(low[j]) != _h(base_out)]
            distinct = len({_h(low[j]) for j in others}) == len(others)
            score = (len(others), distinct)
            if best is None or score > best_score:
                best, best_score = (here, base_out, low, others, weighty), score
            if score == (V - 1, True):  # every token but the leader told apart: no context does better
                break
        assert best is not None
        return best

    def _weighty(self, v: RaceView, here: Assign, scale: float) -> tuple[Any, dict[int, Any], list[int]] | None:
        """A long race's tokens that can weigh anything, found by group tests instead of one
        token at a time (docs/gate.md, "Races over a whole vocabulary"): (the leader's output
        at every E = ``scale``, each found token's output when it wins alone, the tokens found).

        A group's tokens all at E = DELTA make its heaviest token of positive weight win
        (under the race reading every race split rests on). First one token is found whose
        win changes the leader's output (``_group_search``'s ``first``; none: None). Its
        weight gives a second reference: it scores 4 against the leader's 1, an output that
        differs from the leader's. Then every group is tried against both: a group that
        holds a token of positive weight makes that token win both races, and its output
        differs from at least one of the two, so the group is split; a group that changes
        neither holds no weight, the same conclusion the token-by-token reading draws from
        each token alone, at the same threshold (a score of 4 / DELTA beats neither). Cost:
        a few runs per token of weight and per halving, not per token of the vocabulary."""
        V = v.size
        lanes = list(range(V))
        flat = [scale] * V
        base_out = self.eval([{**here, **v.assign(flat)}])[0].output
        first = self._group_search(v, here, [(flat, base_out)], lanes, first=True)
        if not first:
            return None  # no second reference: the caller reads the race token by token, as below GROUP_FROM
        lam = next(iter(first))
        (cut,) = self._cuts_race(
            [functools.partial(lambda j, E: {**here, **v.assign(_one_low(V, j, E, scale))}, lam)],
            v, base_out, [(v.ids, v.how, scale, "alone", lam)], hi=scale,
        )  # fmt: skip
        lead_row = [scale] * V
        lead_row[lam] = cut / 4  # the token's score: 4 (the leader's: 1)
        lead_out = self.eval([{**here, **v.assign(lead_row)}])[0].output
        if _h(lead_out) == _h(base_out):
            raise self._not_race(v, "a token that wins alone gives the leader's output when it leads")
        rest = [j for j in lanes if j != lam]
        found = self._group_search(v, here, [(flat, base_out), (lead_row, lead_out)], rest)
        low = {lam: first[lam][0], **{j: outs[0] for j, outs in found.items()}}
        return base_out, low, sorted(low)

    def _group_search(
        self, v: RaceView, here: Assign, refs: list[tuple[list[float], Any]], lanes: list[int], first: bool = False
    ) -> dict[int, list[Any]]:
        """The tokens of ``lanes`` that, alone at E = DELTA in any of the rows ``refs`` (each
        with its output), change that row's output: {token: its output in each row}. A
        group's tokens all at E = DELTA make its heaviest token win: a group that changes a
        row's output is halved until single tokens; one that changes none is dropped whole
        (with two references whose outputs differ, it holds no weight: ``_weighty``).

        ``first``: one such token, or none. With one reference a group that changes nothing
        may still hide a token that does behind a heavier one that does not (the leader
        itself), so where no group changes the output every group is halved, level by level
        (``FIRST_GROUPS`` groups at most: then none is found), and the first group that
        changes it is followed down to its heaviest token.

        The tokens this draw's searches found before (``lanes``) are tried alone first and the
        rest as one group: the same tests on another partition of ``lanes``, a few runs where
        the enumeration rebuilds a node at a point close to one it has read."""
        found: dict[int, list[Any]] = {}
        known = self.lanes.setdefault(v.ids, set())  # tokens found before in this draw: each tried alone first
        alone = [j for j in lanes if j in known]
        rest = np.setdiff1d(np.asarray(lanes, dtype=np.int64), np.asarray(alone, dtype=np.int64))
        pending = [np.asarray([j], dtype=np.int64) for j in alone] + ([rest] if len(rest) else [])
        while pending:
            points = []
            for group in pending:
                for row, _ in refs:
                    moved = np.array(row, dtype=np.float64)
                    moved[group] = DELTA
                    points.append({**here, **v.assign(moved)})
            outs = [r.output for r in self.eval(points)]
            nxt, changed = [], []
            for i, group in enumerate(pending):
                mine = outs[i * len(refs) : (i + 1) * len(refs)]
                if all(_h(o) == _h(out) for o, (_, out) in zip(mine, refs)):
                    if first and len(group) > 1:
                        nxt.append(group)  # it may hide one: halved if no group changes the output
                    continue
                if len(group) == 1:
                    found[int(group[0])] = mine
                    known.add(int(group[0]))
                    if first:
                        return found
                    continue
                changed.append(group)
            if first:
                nxt = changed[:1] or nxt
                if len(nxt) > FIRST_GROUPS:
                    return found
            else:
                nxt = changed
            pending = [half for group in nxt for half in (group[: len(group) // 2], group[len(group) // 2 :])]
        return found

    def _split_race(self, v: RaceView, point: Assign) -> Node:
        """A race split into cells of the order its tokens finish in: the weights recovered
        (the first time a draw is split, twice: at two scales of E, since a race's cuts scale
        with E), then the shortest prefix of
        the order the output depends on (every prefix's output the same with the rest in
        both orders), its prefixes grouped by output, each group weighted by the
        Plackett-Luce law of ordered draws without replacement."""
        self.found = {}
        w = self._weights(v, point, 1.0)
        if (v.ids, v.how) not in self.scaled:  # the race's form, once per draw: its cuts scale with E
            w2 = self._weights(v, point, 0.5)
            tol = 2.0 ** -(min(b.grid for b in v.blocks) - 10) * max(w)
            if any(abs(a - b) > tol for a, b in zip(w, w2)):
                raise self._not_race(v, "its cuts do not scale with E")
            self.scaled.add((v.ids, v.how))
        V = v.size
        live = [j for j in range(V) if w[j] > 0]
        spread = max(w[j] for j in live) / min(w[j] for j in live) * SPREAD ** (len(live) - 1)
        if spread * v.finest() > 0.25:
            raise self._not_race(v, "its weights are too far apart for the generator's grid to order them")
        t, count = 1, 0
        while t < len(live) - 1:  # a prefix of len(live) - 1 fixes the whole order
            prefixes = list(itertools.permutations(live, t))
            count += len(prefixes)
            if count > RACE_ORDERS:
                raise self._not_race(v, f"its output depends on more than {RACE_ORDERS} orders of its tokens")
            asks = []
            for pre in prefixes:
                rest = [j for j in live if j not in pre]
                asks += [_race_row(v, w, point, [*pre, *rest]), _race_row(v, w, point, [*pre, *rest[::-1]])]
            outs = [_h(r.output) for r in self.eval(asks)]
            if all(outs[i] == outs[i + 1] for i in range(0, len(outs), 2)):
                break
            t += 1
        finer = self.finer.get(v.ids)
        t = min(max(t, finer or 0), len(live))
        prefixes = list(itertools.permutations(live, t))
        points = [_race_row(v, w, point, _full(pre, live)) for pre in prefixes]
        outs = [r.output for r in self.eval(points)]
        groups: dict[Hashable, list[tuple[int, ...]]] = {}
        keys = prefixes if finer is not None else self._keys(v.ids, point, points, outs)
        for pre, key in zip(prefixes, keys):
            groups.setdefault(key, []).append(pre)
        node = Node("race", v.ids, weights=w, how=v.how, prefix=t, hints=dict(self.found))
        node.parts = [race_part(v, w, point, members) for members in groups.values()]
        return node

    def _cuts_race(
        self, fns: list[Callable[[float], dict]], v: RaceView, far: Any, keys: list[Any], ends: bool = False,
        hi: float = 1.0,
    ) -> list[float]:  # fmt: skip
        """For each fn: the least E in [DELTA, hi] (over the floats of the draw's dtype) at which
        fn(E)'s output first differs from fn(DELTA)'s (where the moved token stops leading; an
        order's later places may change after it); 0.0 when fn(DELTA) is already ``far``, the
        output at E = hi (``ends``: a token too light to win even at DELTA). The cuts found
        before under the same key (the block, the pass, the token) are tried first: two
        answers confirm one."""
        grid = min(b.grid for b in v.blocks)
        lo_bits, hi_bits = _to_bits(DELTA, grid), _to_bits(hi, grid)
        state = [[lo_bits, hi_bits] for _ in fns]
        outs_lo = [r.output for r in self.eval([f(DELTA) for f in fns])]
        done = [False] * len(fns)
        res = [0.0] * len(fns)
        for i, o in enumerate(outs_lo):
            if _h(o) == _h(far):
                if not ends:
                    raise self._not_race(v, "an exponential's cut could not be found")
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
                known = [self.hint[keys[i]]] if keys[i] in self.hint else self.cuts.get(keys[i], [])
                guesses = [g for g in known if a < g - 1 and g < c] if first else []
                if guesses:
                    asks += [(i, x) for g in guesses[-4:] for x in (g - 1, g)]
                    continue
                n = min(per, c - a - 1)
                asks += [(i, a + (c - a) * (j + 1) // (n + 1)) for j in range(n)]
            first = False
            runs = self.eval([fns[i](_from_bits(k, grid)) for i, k in asks])
            by: dict[int, list[tuple[int, Any]]] = {}
            for (i, k), r in zip(asks, runs):
                by.setdefault(i, []).append((k, r.output))
            for i, got in by.items():
                a, c = state[i]
                for k, o in sorted(got):
                    if _h(o) != _h(outs_lo[i]):  # past the first change (the token no longer leads)
                        c = k
                        break
                    a = k
                state[i] = [a, c]
            for i in live:
                if state[i][1] - state[i][0] <= 1:
                    done[i] = True
        for i in range(len(fns)):
            if res[i] == 0.0 and _h(outs_lo[i]) != _h(far):
                res[i] = _from_bits(state[i][1], grid)
                self.found[keys[i]] = state[i][1]
                seen = self.cuts.setdefault(keys[i], [])
                if state[i][1] not in seen:
                    seen.append(state[i][1])
        return res

    def _not_race(self, v: RaceView, why: str) -> Unsupported:
        what = "row of exponentials" if v.how == "exp" else "row of uniforms"
        return Unsupported(
            f"{v.name()}: the output does not depend on the {what} as an exponential race, argmax or order of "
            f"w / E ({why}); exact certification cannot follow it"
        )


def _race_row(v: RaceView, w: list[float], point: Assign, order: list[int], ratio: float = SPREAD,
              zero: float = 1.0) -> Assign:  # fmt: skip
    """``point`` with the race's values set so that its tokens finish in ``order``: scores
    ``ratio``^-i along the order, the largest E 4 (the tokens of weight 0 at E = ``zero``)."""
    E = [zero] * v.size
    raw = {j: w[j] * ratio**i for i, j in enumerate(order)}
    top = max(raw.values())
    for j, x in raw.items():
        E[j] = 4 * x / top
    return {**point, **v.assign(E)}


def _full(prefix: tuple[int, ...] | list[int], live: list[int]) -> list[int]:
    return [*prefix, *(j for j in live if j not in prefix)]


def race_part(v: RaceView, w: list[float], point: Assign, members: list[tuple[int, ...]]) -> Part:
    """The part of a race split that holds the order prefixes ``members`` (grouped: the same
    output in every context tried), weighted by their Plackett-Luce law and standing at the
    likeliest of them; its ``alts`` are where the product check moves the race: the near-tie
    corner of that order, the rest of it reversed, its zero-weight values moved, and the
    other members."""
    live = [j for j in range(v.size) if w[j] > 0]
    zeros = [j for j in range(v.size) if w[j] <= 0]
    t = len(members[0])
    probs = [_plackett_luce(w, pre) for pre in members]
    best = int(np.argmax(probs))
    rep = _full(members[best], live)
    corners = [_race_row(v, w, point, rep, NEAR_TIE), _race_row(v, w, point, [*rep[:t], *rep[t:][::-1]])]
    if zeros:
        corners += [_race_row(v, w, point, rep, zero=0.25), _race_row(v, w, point, rep, zero=4.0)]
    corners += [_race_row(v, w, point, _full(pre, live)) for i, pre in enumerate(members) if i != best]
    strip = set(v.ids)
    alts = [{k: x for k, x in c.items() if k in strip} for c in corners]
    assign = {k: x for k, x in _race_row(v, w, point, rep).items() if k in strip}
    return Part(sum(probs), assign, alts, [list(pre) for pre in members])


def _same(a: Node, b: Node) -> bool:
    """Whether two nodes split the same blocks into the same cells (weights to within their
    bisection's grain) or are leaves with the same output."""
    if a.kind != b.kind or a.blocks != b.blocks:
        return False
    if a.kind == "leaf":
        return bool(_h(a.output) == _h(b.output))
    if a.kind == "race":  # the same order prefixes grouped alike, in any order of the groups
        cells = sorted(sorted(map(tuple, p.cell)) for p in a.parts)
        if (a.how, a.prefix, cells) != (b.how, b.prefix, sorted(sorted(map(tuple, p.cell)) for p in b.parts)):
            return False
    elif [p.cell for p in a.parts] != [p.cell for p in b.parts]:
        return False
    wa, wb = a.weights or [], b.weights or []
    scale = max([*wa, *wb, 1e-300])
    return len(wa) == len(wb) and all(abs(x - y) <= 2**-18 * scale for x, y in zip(wa, wb))


def _plain(x: Any) -> Any:
    """An output as JSON: tuples as lists, NumPy scalars as numbers."""
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, np.generic):
        return x.item()
    return x


def _one_low(V: int, j: int, E: float, rest: float = 1.0) -> Any:
    row = [rest] * V
    row[j] = E
    return race_row(row)


def _h(x: Any) -> Any:
    """A hashable, comparable form of an output."""
    if isinstance(x, dict):
        return tuple(sorted((k, _h(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return tuple(_h(v) for v in x)
    if isinstance(x, np.ndarray):
        return tuple(x.reshape(-1).tolist())
    return x


def unread_race(b: Block) -> Unsupported:
    """The refusal of a leaf below which the long race ``b`` was not shown to matter: with no
    token found whose win changes the output there is no second output to test groups of
    tokens against (a group's heaviest token may hide a lighter one that changes it), and
    showing it token by token takes a run per token (docs/gate.md, "Races over a whole
    vocabulary")."""
    return Unsupported(
        f"{b.name()} (a row of {b.size:,}): no token's win changes the output in one of its cells (a race the output "
        "does not read there, as a recovered token when every draft is accepted) and it is not fixed above them; "
        f"showing that no token ever does takes a run per token ({b.size:,} runs), so exact certification stops here"
    )


def long_race(b: Block) -> bool:
    """A race over more than ``GROUP_FROM`` tokens: the tokens that matter found by group tests."""
    return b.kind == "race" and b.size > GROUP_FROM
