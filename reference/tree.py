"""The dynamic draft tree, EAGLE-2 style (SPEC section 3).

Layer 1 is the root's pool; for d = 2..D the first ``beam`` nodes of layer d-1 by order
key are expanded; the pruned tree T_R is the first ``budget`` recorded nodes by order key.
Each expansion of a rheo node draws its sample Y through the chooser (name ("draw", e),
expansions numbered in the order they happen: root first, then layer by layer in order-key
order).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .instance import Instance


class Node(NamedTuple):
    """A recorded draft node. ``prefix`` is its token path from the root (the node's token
    is ``prefix[-1]``); ``slot_path`` the slot indices from the root; ``key`` its order key
    (``order_key``), computed once when the node is made."""

    slot_path: tuple
    prefix: tuple
    kind: str  # "lead" | "sample" | "fill"
    score: object
    key: tuple

    @property
    def depth(self) -> int:
        return len(self.slot_path)

    @property
    def token(self):
        return self.prefix[-1]


def order_key(score, slot_path: tuple, prefix: tuple, tie_break: str = "slot") -> tuple:
    """(score desc, depth asc, slot path asc); tie_break "token" uses the token path
    instead of the slot path (a wrong-on-purpose variant)."""
    return (-score, len(slot_path), slot_path if tie_break == "slot" else prefix)


class LabelledTree:
    """A pruned tree as verification sees it: (slot_path, token, kind) per node.

    Two joint draws with equal labelled trees have the same verification law (SPEC 5).
    """

    __slots__ = ("nodes", "_children", "_hash")

    def __init__(self, nodes):
        self.nodes = tuple(sorted(nodes))
        self._hash = hash(self.nodes)
        kids: dict = {}
        for path, token, kind in self.nodes:
            kids.setdefault(path[:-1], []).append((path[-1], token, kind))
        self._children = kids

    def children(self, path: tuple) -> list:
        """Surviving children of the node at ``path``: (slot, token, kind) in slot order."""
        return self._children.get(path, [])

    def __eq__(self, other):
        return isinstance(other, LabelledTree) and self.nodes == other.nodes

    def __hash__(self):
        return self._hash

    def __len__(self):
        return len(self.nodes)



@dataclass
class Tree:
    recorded: list  # every recorded node, in creation order
    pruned: list  # T_R in order-key order
    expansions: list  # (e, prefix, Y or None) in the order they happened

    @property
    def labelled(self) -> LabelledTree:
        return LabelledTree((n.slot_path, n.token, n.kind) for n in self.pruned)


def children_of(inst: Instance, parent: Node | None, y) -> list[Node]:
    """The pool of ``parent`` (None = root) for draw Y = y, as nodes."""
    prefix = () if parent is None else parent.prefix
    path = () if parent is None else parent.slot_path
    score = inst.one if parent is None else parent.score
    tie = inst.config.tie_break
    out = []
    for s, tok, kind, factor in inst.node_laws(prefix).pool(y):
        p, pre, sc = path + (s,), prefix + (tok,), score * factor
        out.append(Node(p, pre, kind, sc, order_key(sc, p, pre, tie)))
    return out


def build_tree(inst: Instance, chooser) -> Tree:
    """Build T_R with every draw of Y answered by ``chooser`` (SPEC 3)."""
    c = inst.config
    expansions: list = []

    def expand(parent: Node | None) -> list[Node]:
        prefix = () if parent is None else parent.prefix
        laws = inst.node_laws(prefix)
        e = len(expansions)
        y = chooser.draw(("draw", e), laws.draws) if laws.draws else None
        expansions.append((e, prefix, y))
        return children_of(inst, parent, y)

    def key(n):
        return n.key

    layer = expand(None)
    recorded = list(layer)
    for _ in range(2, c.depth + 1):
        new: list = []
        for parent in sorted(layer, key=key)[: c.B]:
            new.extend(expand(parent))
        layer = new
        recorded.extend(new)
    pruned = sorted(recorded, key=key)[: c.budget]
    return Tree(recorded, pruned, expansions)
