"""docs/spec.md §7: the simulator consumes uniforms exactly as specified, and its decision
structure has exactly the cycle law."""

from fractions import Fraction as F

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rheo.casefile import load_case
from rheo.checks.cases.strategies import cases
from rheo.reference import Uniforms, build_tree, class_cycle_law, enumerate_choices, make_instance, simulate_cycle, walk


def abc(**kw):
    base = dict(policy="rheo", K=3, m=1, depth=1, budget=2)
    base.update(kw)
    return make_instance(3, ["1/5", "1/2", "3/10"], ["1/2", "3/10", "1/5"], **base)


def u(draw=(0,), sample=(0, 0), det=((0, 0, 0), (0, 0, 0)), final=(0, 0)):
    return Uniforms(list(draw), list(sample), [list(r) for r in det], list(final))


def test_draw_is_inverse_cdf_in_rank_order_first_mass_exceeding_u():
    # r = (0, 3/5, 2/5): cumulative 3/5 then 1
    assert simulate_cycle(abc(), u(draw=[F(1, 2)])).tree.expansions == [(0, (), 1)]
    assert simulate_cycle(abc(), u(draw=[F(3, 5)])).tree.expansions == [(0, (), 2)]  # not "exceeds"
    assert simulate_cycle(abc(), u(draw=[0.999])).tree.expansions == [(0, (), 2)]


def test_coins_accept_iff_u_below_acceptance():
    # Y = B: a = min(1, (1/2)/(3/5)) = 5/6
    res = simulate_cycle(abc(), u(draw=[0], sample=[F(5, 6) - F(1, 100), 0], final=[0, F(1, 2)]))
    assert res.output == (1, 1) and res.accepted == [(1,)]
    assert res.decisions == [(("draw", 0), 1), (("sample", 0), True), (("final", 1), 1)]
    # u = a rejects; the residual (p - r)^+ is all on A, the lead, which then accepts surely
    res = simulate_cycle(abc(), u(draw=[0], sample=[F(5, 6), 0], det=[[F(99, 100)] * 3, [0] * 3], final=[0, 0]))
    assert res.output == (0, 0)
    assert res.decisions[1:3] == [(("sample", 0), False), (("det", 0, 0), True)]


def test_correction_draw_uses_token_id_order():
    # topk keeps A, B; p = (1/5, 1/2, 3/10): reject both coins, the correction is C
    inst = abc(policy="topk", K=2)
    res = simulate_cycle(inst, u(det=[[F(1, 5), F(5, 8)], [0, 0]], final=[0, 0]))
    assert res.output == (2,)
    assert [d[0] for d in res.decisions] == [("det", 0, 0), ("det", 0, 1), ("final", 0)]


def test_expansions_numbered_root_first_then_layer_by_layer_in_order_key_order():
    inst = make_instance(3, ["1/3"] * 3, ["1/2", "3/10", "1/5"], policy="rheo", K=3, m=1, depth=3, budget=4, beam=2)
    res = simulate_cycle(inst, Uniforms([0.9, 0.1, 0.1, 0.1, 0.1], [0] * 4, [[0] * 3] * 4, [0] * 4))
    prefixes = [pre for _, pre, _ in res.tree.expansions]
    assert prefixes[0] == () and [e for e, _, _ in res.tree.expansions] == list(range(5))
    # layer 1: lead A (1/2), sample C with proxy 1/2 (slot 1): expanded in that order
    assert prefixes[1:3] == [(0,), (2,)]


@given(cases(cap=300))
def test_simulator_decision_law_equals_cycle_law(case):
    inst = load_case(case)
    law: dict = {}
    for prob, out in enumerate_choices(lambda ch: walk(inst, build_tree(inst, ch).labelled, ch)[0], inst.one):
        law[out] = law.get(out, 0) + prob
    expected = {o: p for o, p in class_cycle_law(inst, count_draws=False).law.items() if p != 0}
    assert law == expected


@given(cases(cap=300), st.integers(0, 2**32 - 1))
def test_simulated_cycles_land_in_the_exact_law(case, seed):
    """Random float64 uniforms: every simulated tree is a class, and every output an
    outcome, of positive exact probability."""
    inst = load_case(case)
    law = class_cycle_law(inst, count_draws=False)
    rng = np.random.default_rng(seed)
    c = inst.config
    for _ in range(20):
        res = simulate_cycle(inst, Uniforms.random(rng, c.K, c.B, c.depth))
        assert law.trees.get(res.tree.labelled, 0) > 0
        assert law.law.get(res.output, 0) > 0
        assert len(res.output) == len(res.accepted) + 1


@given(cases(cap=300))
def test_pruned_tree_is_connected(case):
    inst = load_case(case)
    for _, tree in enumerate_choices(lambda ch: build_tree(inst, ch), 1):
        paths = {n.slot_path for n in tree.pruned}
        assert all(len(p) == 1 or p[:-1] in paths for p in paths)
        assert len(tree.expansions) <= 1 + inst.config.B * (inst.config.depth - 1)
        assert len(tree.pruned) == min(inst.config.budget, len(tree.recorded))


class RejectAll:
    """A chooser that rejects every coin, takes the first token of every draw, and keeps the names."""

    def __init__(self):
        self.names = []

    def draw(self, name, items):
        self.names.append(name)
        return next(t for t, pr in items if pr > 0)

    def coin(self, name, a):
        self.names.append(name)
        return False


def test_the_point_mass_coins_at_a_node_are_numbered_in_slot_order():
    """docs/spec.md §7: the j-th deterministic step at depth d reads the coin ("det", d, j);
    three rejected Top-K children read j = 0, 1, 2, then the correction token ("final", 0)."""
    inst = make_instance(4, ["1/4"] * 4, ["2/5", "1/5", "3/10", "1/10"], policy="topk", K=3, depth=1, budget=3)
    tree = build_tree(inst, RejectAll())
    chooser = RejectAll()
    out, accepted = walk(inst, tree.labelled, chooser)
    assert chooser.names == [("det", 0, 0), ("det", 0, 1), ("det", 0, 2), ("final", 0)]
    assert out == (3,) and accepted == []


def test_a_walk_reads_the_deadline_in_each_rejection():
    """Top-K at depth 1, both children rejected (u_det = 0.99): each rejection renormalises
    the residual over the vocabulary of 3, 2 deadline checks for its total and 3 for the
    division, so 10 checks in all (the target law is read before, and cached)."""
    from rheo.reference.choices import UniformChooser

    from .deadlines import CountingDeadline

    d = CountingDeadline()
    inst = make_instance(
        3, ["1/5", "1/2", "3/10"], ["1/2", "3/10", "1/5"], policy="topk", K=3, depth=1, budget=2, deadline=d
    )
    u = Uniforms([0.0], [0.0, 0.0], [[0.99] * 3, [0.99] * 3], [0.5, 0.5])
    tree = build_tree(inst, UniformChooser(u))
    inst.target_law(())
    d.checked.clear()
    assert walk(inst, tree.labelled, UniformChooser(u)) == ((2,), [])
    assert d.checked == {"in a loop over a law's entries": 10}


def test_labelled_trees_are_equal_exactly_when_their_labels_are():
    """The class enumerator merges joint draws by labelled tree (a dict key): two trees are
    equal, whatever the order their nodes were listed in, exactly when their (slot path, token,
    kind) labels are; a tree is never equal to something that is not one."""
    from rheo.reference.tree import LabelledTree

    a = LabelledTree([((0,), 2, "lead"), ((1,), 0, "sample")])
    assert a == LabelledTree([((1,), 0, "sample"), ((0,), 2, "lead")]) and hash(a) == hash(LabelledTree(a.nodes))
    assert a != LabelledTree([((0,), 2, "lead"), ((1,), 1, "sample")])
    assert a != LabelledTree([((0,), 2, "lead")])
    assert a != a.nodes and a != None  # noqa: E711  (== with a non-tree: False, not an error)
    assert len({a, LabelledTree(reversed(a.nodes)), LabelledTree([((0,), 2, "lead")])}) == 2
    assert hash(a) != hash(LabelledTree([((0,), 2, "lead")]))  # the hash reads the labels (a dict key)
