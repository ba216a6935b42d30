"""The equivalence-class enumerator (docs/spec.md §5): same answer as ``naive_cycle_law``, far
fewer branches.

It builds T_R like ``tree.build_tree`` but merges joint draws that cannot lead to different
labelled pruned trees, as early as it can:

1. **Lazy samples.** At an expansion with f = K-m-1 fill slots, every draw Y beyond the
   first f residual tokens gives the same fills u_1..u_f and (for an identity-independent
   proxy) the same factor; only the sample node's own token differs. Those draws stay one
   *group* until the token matters: when the sample node is expanded (its draft law
   depends on it) or when it survives pruning (its label is part of the class). With the
   "self" proxy the group is split by q value; with ``tie_break: "token"`` nothing is
   grouped (the order key reads tokens).
2. **Dead nodes.** A node with at least R recorded nodes strictly ahead of it in order key
   never survives, nor does any descendant (keys only get worse along a path), and the
   nodes it could displace from a beam are worse still. Its expansion is skipped: its draw
   is summed out without branching.

Each finished branch is a set of joint draws with one labelled pruned tree; branches with
equal trees are merged, and each distinct tree (a *class*) is verified once:
E[...] = sum over classes of P(class) * law(class) (docs/spec.md §5). Skipping dead expansions hides
their draws, so ``joint_draws`` is counted by a second pass without skipping
(``count_joint_draws``), which has no verification in it and multiplies the last layer's
draws in without branching (nothing is expanded after them).

Branching is recursive (one level per expansion with more than one group), run on an
explicit stack (``stack.run_stack``) so that deep trees do not meet Python's recursion
limit.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import product

from .cycle import CycleLaw
from .deadline import Deadline, Timeout, paced
from .instance import Instance, NodeLaws
from .numbers import Number
from .params import Prefix
from .stack import Call, run_stack
from .tree import Label, LabelledTree, Node, OrderKey, children_of
from .verify import Output, verification_law

GroupSpec = tuple[list[int], list[Number], Number]  # (tokens, their masses r(Y), the total mass)
Leaf = Callable[[list[Label], Number, int], None]  # (labelled nodes, probability, joint draws) of a branch


class _Group:
    """The not-yet-resolved token of one sample node: Y is one of ``tokens``."""

    __slots__ = ("tokens", "masses", "total")

    def __init__(self, tokens: list[int], masses: list[Number], total: Number) -> None:
        self.tokens, self.masses, self.total = tokens, masses, total


class _State:
    __slots__ = ("recorded", "layer", "queue", "d", "prob", "mult", "share")
    recorded: list[Node]
    layer: list[Node]
    queue: list[Node | None]  # None: the root
    d: int
    prob: Number
    mult: int
    share: float  # this branch's share of the exploration, split by the draws at each branching (progress only)

    def copy(self) -> _State:
        s = _State()
        s.recorded, s.layer, s.queue = list(self.recorded), list(self.layer), list(self.queue)
        s.d, s.prob, s.mult, s.share = self.d, self.prob, self.mult, self.share
        return s


_ROOT = None


def _group(n: Node) -> _Group:
    """The group a lazy sample node carries where its token id would be (``_Explorer._apply``)."""
    return n.token  # type: ignore[return-value]  # the one place a Node's token is not an int


class _Explorer:
    def __init__(
        self, inst: Instance, skip_dead: bool, on_leaf: Leaf, deadline: Deadline | None = None, count_only: bool = False
    ) -> None:
        self.inst = inst
        self.count_only = count_only
        self.c = inst.config
        self.skip_dead = skip_dead
        self.on_leaf = on_leaf
        self.deadline = deadline
        self.leaves = 0
        self.shares_done = 0.0  # the share of the exploration finished (progress lines)
        self.what = "joint-draw counting branches" if count_only else "class-enumerator branches"
        self.group = self.c.tie_break == "slot"
        self._groups_at: dict[Prefix, list[GroupSpec]] = {}  # prefix -> draw groups (a function of the prefix only)

    @staticmethod
    def key(n: Node) -> OrderKey:
        return n.key

    def run(self) -> None:
        st = _State()
        st.recorded, st.layer, st.queue, st.d, st.prob, st.mult = [], [], [_ROOT], 1, self.inst.one, 1
        st.share = 1.0
        if self.deadline is not None:
            self.deadline.begin(self.what)
        with self.inst.bounded(self.deadline):
            run_stack(self._run(st), self.deadline, "class-enumerator steps")

    def _dead(self, v: Node, recorded: list[Node]) -> bool:
        kv = v.key
        ahead = 0
        for n in paced(recorded, self.deadline, "comparing order keys"):
            if n.key < kv:
                ahead += 1
                if ahead >= self.c.budget:
                    return True
        return False

    def _groups(self, laws: NodeLaws) -> list[GroupSpec]:
        groups = self._groups_at.get(laws.prefix)
        if groups is None:
            groups = self._groups_at[laws.prefix] = self._make_groups(laws)
        return groups

    def _make_groups(self, laws: NodeLaws) -> list[GroupSpec]:
        f, d = laws.fill_count, self.deadline
        pos = {u: i for i, u in enumerate(paced(laws.residual_support, d))}
        singles = [([u], [m], m) for u, m in paced(laws.draws, d) if pos[u] < f or not self.group]
        if not self.group:
            return singles
        tail = [(u, m) for u, m in paced(laws.draws, d) if pos[u] >= f]
        if not tail:
            return singles
        if laws.proxy is None:  # "self" proxy: the factor q(Y) must agree inside a group
            by_q: dict[Number, list[tuple[int, Number]]] = {}
            for u, m in paced(tail, d):
                by_q.setdefault(laws.q[u], []).append((u, m))
            parts = list(by_q.values())
        else:
            parts = [tail]
        for part in parts:
            total = sum((m for _, m in paced(part[1:], d)), part[0][1])
            singles.append(([u for u, _ in part], [m for _, m in part], total))
        return singles

    def _apply(self, st: _State, v: Node | None, group: GroupSpec) -> None:
        tokens, masses, total = group
        kids = children_of(self.inst, v, tokens[0])
        if len(tokens) > 1:
            # only in slot tie-break mode, where a node's key does not read its tokens,
            # so the key made with tokens[0] holds for every member of the group;
            # the group stands in for the sample's token id (see _group)
            g = _Group(tokens, masses, total)
            kids = [
                n._replace(prefix=n.prefix[:-1] + (g,)) if n.kind == "sample" else n  # type: ignore[operator]
                for n in kids
            ]
            st.mult *= len(tokens)
        st.prob = st.prob * total
        st.layer.extend(kids)
        st.recorded.extend(kids)

    def _run(self, st: _State) -> Call[None]:
        """Follow one branch to its end; recursive where it branches (``yield`` is the
        recursive call, run by ``run_stack``)."""
        c = self.c
        while True:
            if st.queue:
                v = st.queue.pop()
                if v is not _ROOT:
                    if self.skip_dead and self._dead(v, st.recorded):
                        continue
                    g = v.prefix[-1]
                    if isinstance(g, _Group):  # about to be expanded: its token matters now
                        idx = next(i for i, n in enumerate(st.recorded) if n.slot_path == v.slot_path)
                        for t, mass in zip(g.tokens, g.masses):
                            st2 = st.copy()
                            v2 = v._replace(prefix=v.prefix[:-1] + (t,))
                            st2.recorded[idx] = v2
                            st2.queue.append(v2)
                            st2.prob = st2.prob * (mass / g.total)
                            st2.mult //= len(g.tokens)
                            st2.share /= len(g.tokens)
                            yield self._run(st2)
                        return
                laws = self.inst.node_laws(() if v is _ROOT else v.prefix)
                if self.count_only and st.d == c.depth:
                    # last layer: nothing is expanded after it, so its draws only multiply
                    st.mult *= max(1, len(laws.draws))
                    continue
                if not laws.draws:
                    kids = children_of(self.inst, v, None)
                    st.layer.extend(kids)
                    st.recorded.extend(kids)
                    continue
                groups = self._groups(laws)
                if len(groups) == 1:
                    self._apply(st, v, groups[0])
                    continue
                draws = sum(len(tokens) for tokens, _, _ in groups)  # a lazy group may split into its tokens later
                for group in groups:
                    st2 = st.copy()
                    st2.share *= len(group[0]) / draws
                    self._apply(st2, v, group)
                    yield self._run(st2)
                return
            if st.d < c.depth and st.layer:  # an empty layer: no deeper node, the tree is complete
                if self.deadline is not None:
                    self.deadline.check(st.d, "layers built")
                st.queue = sorted(st.layer, key=self.key)[: c.B][::-1]  # type: ignore[assignment]  # no root here
                st.layer = []
                st.d += 1
                continue
            self._finish(st)
            return

    def _finish(self, st: _State) -> None:
        self.leaves += 1
        self.shares_done += st.share
        if self.deadline is not None:
            self.deadline.check(self.leaves, self.what, self.shares_done)
        pruned = sorted(st.recorded, key=self.key)[: self.c.budget]
        fixed = [(n.slot_path, n.token, n.kind) for n in pruned if not isinstance(n.token, _Group)]
        lazy = [n for n in pruned if isinstance(n.token, _Group)]
        if not lazy:
            self.on_leaf(fixed, st.prob, st.mult)
            return
        size = 1
        for n in lazy:
            size *= len(_group(n).tokens)
        mult = st.mult // size
        options = [
            [(n.slot_path, t, n.kind, mass / _group(n).total) for t, mass in zip(_group(n).tokens, _group(n).masses)]
            for n in lazy
        ]
        for combo in paced(product(*options), self.deadline, "listing the trees of a branch"):
            prob = st.prob
            for *_, share in combo:
                prob = prob * share
            self.on_leaf(fixed + [(p, t, k) for p, t, k, _ in combo], prob, mult)


def count_joint_draws(inst: Instance, deadline: Deadline | None = None) -> int:
    """The number of joint draws (r(Y) > 0 at every expansion that happens), without
    enumerating them one by one: lazy groups carry their multiplicity."""
    total = 0

    def leaf(nodes: list[Label], prob: Number, mult: int) -> None:
        nonlocal total
        total += mult

    ex = _Explorer(inst, skip_dead=False, on_leaf=leaf, deadline=deadline, count_only=True)
    ex.run()
    return total


def class_cycle_law(
    inst: Instance, count_draws: bool = True, deadline: Deadline | None = None, count_seconds: float | None = None
) -> CycleLaw:
    """The cycle law summed over classes (distinct labelled pruned trees).

    Counting joint draws grows exponentially with depth; with ``count_seconds`` it stops
    after that long and ``joint_draws`` is None (the law itself is unaffected)."""
    trees: dict[LabelledTree, Number] = {}

    def leaf(nodes: list[Label], prob: Number, mult: int) -> None:
        t = LabelledTree(nodes)
        trees[t] = trees.get(t, 0) + prob

    ex = _Explorer(inst, skip_dead=True, on_leaf=leaf, deadline=deadline)
    ex.run()
    law: dict[Output, Number] = {}
    if deadline is not None:
        deadline.begin("classes verified", len(trees))
    with inst.bounded(deadline):
        for i, (tree, pt) in enumerate(trees.items()):
            if deadline is not None:
                deadline.check(i, "classes verified")
            for seq, pr in paced(verification_law(inst, tree).items(), deadline, "summing the verified laws"):
                law[seq] = law.get(seq, 0) + pt * pr
    draws = None
    if count_draws:
        cap = deadline
        if count_seconds is not None:  # its own cap, within what is left of the deadline
            left = None if deadline is None else deadline.remaining()
            seconds = count_seconds if left is None else min(count_seconds, left)
            cap = (
                Deadline(seconds)
                if deadline is None
                else Deadline(seconds, deadline.progress, deadline.every, deadline.heartbeat)
            )
        try:
            draws = count_joint_draws(inst, cap)
        except Timeout:
            if deadline is not None:
                deadline.check(None, "while counting joint draws")  # raises if the deadline itself ran out
            if count_seconds is None:
                raise
    return CycleLaw(law, joint_draws=draws, classes=len(trees), enumerator="classes", trees=trees)
