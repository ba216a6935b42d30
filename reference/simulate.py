"""The single-cycle simulator driven by explicit uniforms (docs/spec.md §7).

``simulate_cycle(inst, uniforms)`` builds T_R (draw of Y at expansion e from
``u_draw[e]``, inverse CDF in rank order) and verifies it (``u_sample[d]``,
``u_det[d][j]``, ``u_final[d]``). The fastpath and user implementations are compared
with it decision by decision.
"""

from __future__ import annotations

from dataclasses import dataclass

from .choices import Name, UniformChooser, Uniforms
from .instance import Instance
from .tree import SlotPath, Tree, build_tree
from .verify import Output, walk


@dataclass
class CycleResult:
    tree: Tree
    output: Output  # accepted tokens + the final bonus/correction token
    accepted: list[SlotPath]  # slot paths of the accepted nodes, root to leaf
    decisions: list[tuple[Name, int | bool]]  # (uniform name, outcome) in the order consumed


def simulate_cycle(inst: Instance, uniforms: Uniforms) -> CycleResult:
    chooser = UniformChooser(uniforms)
    tree = build_tree(inst, chooser)
    output, accepted = walk(inst, tree.labelled, chooser)
    return CycleResult(tree, output, accepted, chooser.decisions)
