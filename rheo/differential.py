"""Decision-by-decision comparison of the fastpath with the reference simulator (SPEC 7).

Both engines get the same uniforms; the fastpath runs a whole batch at once, the reference
``simulate_cycle`` runs each request on a float64 ``Instance`` holding the same laws. They
must build the same T_R (tokens, kinds, slot paths) and emit the same output along the same
accepted path, *wherever no decision is within ``margin`` of its threshold*: float64
rounding differs between the engines by a few ulps, so a uniform within 1e-9 of an
acceptance value, a cumulative mass within 1e-9 of a draw's u, or two different path scores
within 1e-9 could legitimately go either way. Those requests are reported as "near" and
not compared; exact ties (equal scores, equal probabilities) are compared, because both
engines compute them from identical operands.
"""
from __future__ import annotations

from dataclasses import dataclass

from rheo.reference import UniformChooser, Uniforms, simulate_cycle
from rheo.reference.tree import build_tree
from rheo.reference.verify import walk

MARGIN = 1e-9


class MarginChooser(UniformChooser):
    """A ``UniformChooser`` that also records how close each decision came to flipping."""

    def __init__(self, uniforms):
        super().__init__(uniforms)
        self.margin = float("inf")

    def draw(self, name, items):
        u = float(self.uniforms.lookup(name))
        cum = 0.0
        for _, mass in items:
            if mass > 0:
                cum += float(mass)
                self.margin = min(self.margin, abs(cum - u))
        return super().draw(name, items)

    def coin(self, name, a):
        a = float(a)
        if 0 < a < 1:
            self.margin = min(self.margin, abs(float(self.uniforms.lookup(name)) - a))
        return super().coin(name, a)


def _relative_gap(xs) -> float:
    """The smallest relative gap between two different values of ``xs``."""
    vals = sorted(set(float(x) for x in xs))
    gap = float("inf")
    for a, b in zip(vals, vals[1:]):
        gap = min(gap, (b - a) / max(abs(b), 1e-300))
    return gap


def _near_ties(inst, tree, prefixes) -> float:
    """Smallest relative gap among path scores, draft probabilities at expanded nodes, and
    target-filter thresholds at ``prefixes``."""
    gap = _relative_gap(n.score for n in tree.recorded)
    for _, prefix, _ in tree.expansions:
        gap = min(gap, _relative_gap(inst.node_laws(prefix).q))
    f = inst.config.target_filters
    if f.active:
        from rheo.reference.numbers import temper
        for prefix in prefixes:
            p = temper(inst.target(prefix), inst.config.temperature)
            gap = min(gap, _relative_gap(p))
            if f.top_p is not None:
                cum = 0.0
                for x in sorted(p, reverse=True):
                    cum += x
                    gap = min(gap, abs(cum - float(f.top_p)))
            if f.min_p is not None:
                top = max(p)
                gap = min(gap, min(abs(x - float(f.min_p) * top) for x in p))
    return gap


@dataclass
class RequestCheck:
    status: str  # "equal" | "differs" | "near"
    detail: str = ""


def reference_cycle(inst, uniforms: Uniforms):
    """The reference cycle on explicit uniforms, with the smallest decision margin."""
    chooser = MarginChooser(uniforms)
    tree = build_tree(inst, chooser)
    output, accepted = walk(inst, tree.labelled, chooser)
    visited = [()] + [output[:i] for i in range(1, len(output))]
    margin = min(chooser.margin, _near_ties(inst, tree, visited))
    return tree, output, accepted, margin


def compare(fast_tree, fast_result, i: int, inst, uniforms: Uniforms, margin: float = MARGIN) -> RequestCheck:
    """Request i of a fastpath batch against the reference on the same uniforms."""
    tree, output, accepted, closest = reference_cycle(inst, uniforms)
    if closest <= margin:
        return RequestCheck("near", f"a decision within {closest:.3g} of its threshold")
    ref_nodes = list(tree.labelled.nodes)
    fast_nodes = fast_tree.request(i)
    if ref_nodes != fast_nodes:
        return RequestCheck("differs", f"tree: reference {ref_nodes} vs fastpath {fast_nodes}")
    fast_out = fast_result.output(i)
    if tuple(output) != fast_out:
        return RequestCheck("differs", f"output: reference {tuple(output)} vs fastpath {fast_out}")
    paths = fast_tree.slot_paths(i)
    fast_acc = [paths[j] for j in fast_result.accepted[i].tolist() if j >= 0]
    if fast_acc != list(accepted):
        return RequestCheck("differs", f"accepted: reference {accepted} vs fastpath {fast_acc}")
    return RequestCheck("equal")


def compare_batch(model, cfg, temperatures, rng, device="cpu"):
    """One batch through the fastpath and each request through the reference, on the same
    fresh uniforms (drawn from the numpy Generator ``rng``). ``model`` implements the
    fastpath's model interface and ``reference_instance(i, cfg, T)``; it is not advanced
    (its reference tables read its current state). Returns (checks, tree, result)."""
    import torch

    from rheo.fastpath import Uniforms as FastUniforms
    from rheo.fastpath import build_tree as fast_build_tree
    from rheo.fastpath import verify

    ref_u = [Uniforms.random(rng, cfg.K, cfg.B, cfg.depth) for _ in temperatures]
    insts = [model.reference_instance(i, cfg, t) for i, t in enumerate(temperatures)]
    uniforms = FastUniforms.stack(ref_u, device=device)
    T = torch.tensor(list(temperatures), dtype=torch.float64, device=device)
    tree = fast_build_tree(model.draft_logits, cfg, T, uniforms)
    result = verify(tree, model.target_logits(tree), T, cfg, uniforms)
    checks = [compare(tree, result, i, inst, u) for i, (inst, u) in enumerate(zip(insts, ref_u))]
    return checks, tree, result


__all__ = ["MARGIN", "MarginChooser", "RequestCheck", "compare", "compare_batch", "reference_cycle", "simulate_cycle"]
