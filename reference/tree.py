"""The dynamic draft tree, EAGLE-2 style (docs/spec.md §3).

Layer 1 is the root's pool; for d = 2..D the first ``beam`` nodes of layer d-1 by order
key are expanded; the pruned tree T_R is the first ``budget`` recorded nodes by order key.
Each expansion of a rheo node draws its sample Y through the chooser (name ("draw", e),
expansions numbered in the order they happen: root first, then layer by layer in order-key
order).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from .choices import Chooser
from .instance import Instance
from .numbers import Number
from .params import Prefix

SlotPath = tuple[int, ...]
OrderKey = tuple[Number, int, tuple[int, ...]]  # (-score, depth, slot path or token path)
Label = tuple[SlotPath, int, str]  # (slot_path, token, kind) of a node of a labelled tree


class Node(NamedTuple):
    """A recorded draft node. ``prefix`` is its token path from the root (the node's token
    is ``prefix[-1]``); ``slot_path`` the slot indices from the root; ``key`` its order key
    (``order_key``), computed once when the node is made."""

    slot_path: SlotPath
    prefix: Prefix
    kind: str  # "lead" | "sample" | "fill"
    score: Number
    key: OrderKey

    @property
    def depth(self) -> int:
        return len(self.slot_path)

    @property
    def token(self) -> int:
        return self.prefix[-1]


def order_key(score: Number, slot_path: SlotPath, prefix: Prefix, tie_break: str) -> OrderKey:
    """(score desc, depth asc, slot path asc); tie_break "token" uses the token path
    instead of the slot path (a wrong-on-purpose variant)."""
    return (-score, len(slot_path), slot_path if tie_break == "slot" else prefix)


class LabelledTree:
    """A pruned tree as verification sees it: (slot_path, token, kind) per node.

    Two joint draws with equal labelled trees have the same verification law (docs/spec.md §5).
    """

    __slots__ = ("nodes", "_children", "_hash")

    def __init__(self, nodes: Iterable[Label]) -> None:
        self.nodes = tuple(sorted(nodes))
        self._hash = hash(self.nodes)
        kids: dict[SlotPath, list[tuple[int, int, str]]] = {}
        for path, token, kind in self.nodes:
            kids.setdefault(path[:-1], []).append((path[-1], token, kind))
        self._children = kids

    def children(self, path: SlotPath) -> list[tuple[int, int, str]]:
        """Surviving children of the node at ``path``: (slot, token, kind) in slot order."""
        return self._children.get(path, [])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LabelledTree) and self.nodes == other.nodes

    def __hash__(self) -> int:
        return self._hash

    def __len__(self) -> int:
        return len(self.nodes)


@dataclass
class Tree:
    recorded: list[Node]  # every recorded node, in creation order
    pruned: list[Node]  # T_R in order-key order
    expansions: list[tuple[int, Prefix, int | None]]  # (e, prefix, Y or None) in the order they happened

    @property
    def labelled(self) -> LabelledTree:
        return LabelledTree((n.slot_path, n.token, n.kind) for n in self.pruned)


def children_of(inst: Instance, parent: Node | None, y: int | None) -> list[Node]:
    """The pool of ``parent`` (None = root) for draw Y = y, as nodes."""
    prefix = () if parent is None else parent.prefix
    path = () if parent is None else parent.slot_path
    score = inst.one if parent is None else parent.score
    tie = inst.config.tie_break
    out: list[Node] = []
    for s, tok, kind, factor in inst.node_laws(prefix).pool(y):
        p, pre, sc = path + (s,), prefix + (tok,), score * factor
        out.append(Node(p, pre, kind, sc, order_key(sc, p, pre, tie)))
    return out


def build_tree(inst: Instance, chooser: Chooser) -> Tree:
    """Build T_R with every draw of Y answered by ``chooser`` (docs/spec.md §3)."""
    c = inst.config
    expansions: list[tuple[int, Prefix, int | None]] = []

    def expand(parent: Node | None) -> list[Node]:
        prefix = () if parent is None else parent.prefix
        laws = inst.node_laws(prefix)
        e = len(expansions)
        y = chooser.draw(("draw", e), laws.draws) if laws.draws else None
        expansions.append((e, prefix, y))
        return children_of(inst, parent, y)

    def key(n: Node) -> OrderKey:
        return n.key

    layer = expand(None)
    recorded = list(layer)
    for _ in range(2, c.depth + 1):
        if not layer:
            break  # no deeper node: the tree is complete
        new: list[Node] = []
        for parent in sorted(layer, key=key)[: c.B]:
            new.extend(expand(parent))
        layer = new
        recorded.extend(new)
    pruned = sorted(recorded, key=key)[: c.budget]
    return Tree(recorded, pruned, expansions)
