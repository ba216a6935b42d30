"""reference/verify.py on hand-made trees: the law of one verification (docs/spec.md §4), worked
out by hand, with the edges the generated cases seldom reach: a child the target gives
probability 0, an acceptance of exactly 1, a rejection that leaves no mass (issue 24:
mutation survivors)."""

from fractions import Fraction as F

from rheo.reference import make_instance
from rheo.reference.tree import LabelledTree
from rheo.reference.verify import Step, _after_rejection, verification_law

from .deadlines import CountingDeadline

LOOP = "in a loop over a law's entries"  # the name paced() gives a loop by default


def _topk():
    """Top-K leads 0 and 2 at the root; the target gives token 2 probability 0 there, and
    token 1 probability 0 after 0."""
    target = {"*": ["1/2", "1/2", "0"], "0": ["1/2", "0", "1/2"]}
    inst = make_instance(3, target, ["1/2", "1/4", "1/4"], policy="topk", K=2, depth=1, budget=2)
    return inst, LabelledTree([((0,), 0, "lead"), ((1,), 2, "lead")])


def test_a_verification_law_holds_only_outputs_of_positive_probability():
    """Lead 0 is accepted w.p. 1/2, then the bonus token after 0 is 0 or 2 (1/2 each: 1 has
    probability 0 and is not an output). Rejected, w = (0, 1, 0): lead 2 is accepted w.p. 0, so
    nothing below it is an output; the correction token is 1 (w.p. 1/2 in all)."""
    inst, tree = _topk()
    assert verification_law(inst, tree) == {(0, 0): F(1, 4), (0, 2): F(1, 4), (1,): F(1, 2)}


def test_an_acceptance_of_one_ends_the_verification():
    """Rheo, K 2, m 1: lead 0, residual r = (0, 1/2, 1/2), sample 1. The target (1/4, 3/4, 0)
    accepts the sample with min(1, (3/4)/(1/2)) = 1: the lead is never tried, and the bonus
    token after 1 is 0 or 1 (1/4, 3/4)."""
    inst = make_instance(3, ["1/4", "3/4", "0"], ["1/2", "1/4", "1/4"], policy="rheo", K=2, m=1, depth=1, budget=2)
    tree = LabelledTree([((0,), 0, "lead"), ((1,), 1, "sample")])
    assert inst.node_laws(()).residual == (0, F(1, 2), F(1, 2))
    assert verification_law(inst, tree) == {(1, 0): F(1, 4), (1, 1): F(3, 4)}


def test_a_rejection_that_leaves_no_mass_gives_no_residual():
    """Rejecting the only token with mass (float rounding makes this reachable) leaves nothing
    to renormalize: None, not a division by zero. Each loop reads the deadline once per entry:
    (w - r)^+ (stochastic only), the sum after the first entry, the renormalization."""
    assert _after_rejection((F(1), F(0)), Step(0, 0, None)) is None
    w = (F(1, 2), F(1, 4), F(1, 4))
    for step, want, checks in [
        (Step(0, 1, None), (F(2, 3), 0, F(1, 3)), 2 + 3),
        (Step(0, 0, (F(1, 4), F(1, 4), F(1, 2))), (1, 0, 0), 3 + 2 + 3),
    ]:
        d = CountingDeadline()
        assert _after_rejection(w, step, d) == want
        assert d.checks == d.checked[LOOP] == checks


def test_the_verification_reads_the_deadline_in_each_loop():
    """On the Top-K tree above, with the target laws computed beforehand: the bonus loop below
    lead 0 (3 entries), its 2 outputs carried up, two rejections (2 + 3 each: the sum, the
    renormalization), the correction loop (3)."""
    inst, tree = _topk()
    verification_law(inst, tree)  # the laws are cached from here on
    d = CountingDeadline()
    with inst.bounded(d):
        verification_law(inst, tree)
    assert d.checked[LOOP] == 3 + 2 + 2 * (2 + 3) + 3
    assert d.checked["verified nodes"] >= 1


def test_the_class_law_verifier_goes_below_the_child_it_accepts():
    """verify "class_law" moves the sample's mass onto x* and checks x* first; whichever child
    it accepts (x*'s slot for the stochastic step, a lead's slot for a deterministic one), the
    verification carries on below that child: at depth 2 some outputs have 3 tokens, below a
    sample child and below a lead, and every output runs along a path of the tree. Rebuilding
    r reads the deadline once per entry."""
    from rheo.reference import class_cycle_law
    from rheo.reference.generate import hashed_instance
    from rheo.reference.verify import steps_at

    inst = hashed_instance(3, 0, policy="rheo", K=2, m=1, depth=2, budget=4, beam=2, verify="class_law")
    below = set()
    for tree in class_cycle_law(inst, count_draws=False).trees:
        kind = {token_path: k for token_path, k in _token_paths(tree)}
        for output in verification_law(inst, tree):
            assert all(output[:k] in kind for k in range(1, len(output))), output
            if len(output) == 3:
                below.add(kind[output[:1]])
        kids = tree.children(())
        if any(k == "sample" for _, _, k in kids):
            d = CountingDeadline()
            with inst.bounded(d):
                steps = steps_at(inst, (), kids)
            assert d.checks == 3 and steps[0].law is not None and {s.slot for s in steps} <= {s for s, _, _ in kids}
    assert below == {"lead", "sample"}


def _token_paths(tree):
    """(token path, kind) of every node of a labelled tree."""
    token_of = {path: (token, kind) for path, token, kind in tree.nodes}
    for path in token_of:
        yield tuple(token_of[path[:k]][0] for k in range(1, len(path) + 1)), token_of[path][1]
