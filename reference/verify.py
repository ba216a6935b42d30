"""Verification of one pruned tree (docs/spec.md §4): RheoVerification, stochastic-first.

Two readings of the same steps, kept side by side:

- ``verification_law(inst, tree)``: the exact law of the cycle output O given the tree;
- ``walk(inst, tree, chooser)``: one verification run whose coins and draws come from a
  chooser (explicit uniforms for the simulator, docs/spec.md §7).

``steps_at`` decides, for one visited node, which children are tried in which order and
with which law; both readings use it, so the wrong-on-purpose variants (``sample_last``,
``class_law``, ``draft_law`` dense / untempered) live in one place.
"""

from __future__ import annotations

from typing import NamedTuple

from .choices import Chooser
from .deadline import Deadline, paced
from .instance import Instance
from .numbers import Law, Number, positive_part_difference
from .params import Prefix
from .stack import Call, run_stack
from .tree import LabelledTree, SlotPath

Output = tuple[int, ...]  # a cycle output o: the accepted tokens and the final token


class Step(NamedTuple):
    """One verification step at a node: the stochastic step (the sample child, checked against
    the draft's residual ``law``, r) or a deterministic one (a lead or fill child: ``law`` None)."""

    slot: int
    token: int
    law: Law | None


def steps_at(inst: Instance, prefix: Prefix, kids: list[tuple[int, int, str]]) -> list[Step]:
    """The verification steps at a visited node with surviving children ``kids``
    ((slot, token, kind) in slot order)."""
    c = inst.config
    sample = next((k for k in kids if k[2] == "sample"), None)
    if c.policy == "topk" or sample is None:
        return [Step(s, t, None) for s, t, _ in kids]
    laws = inst.node_laws(prefix)
    r = laws.residual
    if c.draft_law == "dense":
        r = laws.dense_residual
    elif c.draft_law == "untempered":
        r = laws.untempered_residual
    assert r is not None  # a sample child means the residual support is not empty
    y = sample[1]
    if c.verify == "class_law":
        b = sum(1 for k in kids if k[2] == "fill")
        band = laws.residual_support[:b]
        x_star = laws.residual_support[b]
        zero = inst.zero
        band_mass = sum(r[u] for u in band)  # an int 0 for an empty band: x + 0 keeps x's type
        r = tuple(
            zero if i in band else (x + band_mass if i == x_star else x) for i, x in enumerate(paced(r, inst.deadline))
        )
        if y in band or y == x_star:
            y = x_star
        y_slot = next(s for s, t, _ in kids if t == y)
        stochastic = Step(y_slot, y, r)
        return [stochastic] + [Step(s, t, None) for s, t, _ in kids if t != y]
    stochastic = Step(sample[0], y, r)
    dets = [Step(s, t, None) for s, t, kind in kids if kind != "sample"]
    if c.verify == "sample_last":
        return dets + [stochastic]
    return [stochastic] + dets


def _after_rejection(w: Law, step: Step, deadline: Deadline | None = None) -> Law | None:
    """Residual target law after rejecting ``step`` (docs/spec.md §4 steps 3 and 4)."""
    if step.law is not None:  # the stochastic step
        rest = positive_part_difference(w, step.law, deadline)
    else:
        rest = list(w)
        rest[step.token] = rest[step.token] * 0
    total = sum(paced(rest[1:], deadline), rest[0])
    if not total > 0:
        return None  # only reachable when rejection had probability 0 (float rounding)
    return tuple(x / total for x in paced(rest, deadline))


def _acceptance(w: Law, step: Step, one: Number) -> Number:
    if step.law is not None:  # the stochastic step
        return min(one, w[step.token] / step.law[step.token])
    return w[step.token]


def verification_law(inst: Instance, tree: LabelledTree) -> dict[Output, Number]:
    """Pr(O = o | tree) for every output o (tuples of token ids), exact."""
    return run_stack(_node_law(inst, tree, (), ()), inst.deadline, "verified nodes")


def _node_law(inst: Instance, tree: LabelledTree, path: SlotPath, prefix: Prefix) -> Call[dict[Output, Number]]:
    """The law of the rest of O from the node at ``path``; recursive, run by ``run_stack``
    (``yield`` is the recursive call)."""
    p = inst.target_law(prefix)
    one, deadline = inst.one, inst.deadline
    kids = tree.children(path)
    out: dict[Output, Number] = {}
    if not kids:  # step 1: bonus token
        for t, x in enumerate(paced(p, deadline)):
            if x > 0:
                out[(t,)] = x
        return out
    w: Law | None
    w, mass = p, one
    for step in steps_at(inst, prefix, kids):
        a = _acceptance(w, step, one)
        if a > 0:
            sub = yield _node_law(inst, tree, path + (step.slot,), prefix + (step.token,))
            for seq, pr in paced(sub.items(), deadline):  # each step its own token: keys not seen before
                out[(step.token,) + seq] = mass * a * pr
        mass = mass * (one - a)
        if not mass > 0:
            return out
        w = _after_rejection(w, step, deadline)
        if w is None:
            return out
    for t, x in enumerate(paced(w, deadline)):  # step 5: correction token (the only outputs of length 1)
        if x > 0:
            out[(t,)] = mass * x
    return out


def walk(inst: Instance, tree: LabelledTree, chooser: Chooser) -> tuple[Output, list[SlotPath]]:
    """One verification run. Returns (output tokens, accepted slot paths).

    Coins and draws are named as in docs/spec.md §7: ("sample", d), ("det", d, j), ("final", d).
    """
    path: SlotPath
    prefix: Prefix
    out: list[int]
    accepted: list[SlotPath]
    w: Law | None
    path, prefix, out, accepted = (), (), [], []
    while True:
        d = len(path)
        p = inst.target_law(prefix)
        one = inst.one
        kids = tree.children(path)
        w = p
        moved = False
        j = 0
        for step in steps_at(inst, prefix, kids):
            a = _acceptance(w, step, one)
            if step.law is not None:  # the stochastic step
                ok = chooser.coin(("sample", d), a)
            else:
                ok = chooser.coin(("det", d, j), a)
                j += 1
            if ok:
                path, prefix = path + (step.slot,), prefix + (step.token,)
                out.append(step.token)
                accepted.append(path)
                moved = True
                break
            w = _after_rejection(w, step, inst.deadline)
            if w is None:  # rejection of a probability-1 acceptance: cannot happen exactly
                raise ArithmeticError("rejected a step whose acceptance probability rounds to 1")
        if moved:
            continue
        token = chooser.draw(("final", d), list(enumerate(w)))
        out.append(token)
        return tuple(out), accepted
