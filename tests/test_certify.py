"""docs/spec.md §5: the deviation search equals the brute-force continued law; float64 agrees
with exact arithmetic."""

from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given

from rheo.casefile import load_case, read_case
from rheo.checks.cases.corpus import CONTROLS_BY_NAME
from rheo.checks.cases.strategies import cases
from rheo.reference import (
    certify,
    class_cycle_law,
    continued_sequence_law,
    make_instance,
    max_deviation,
    target_sequence_probability,
)
from rheo.reference.deadline import Deadline

from .deadlines import CountingDeadline


def brute_force(inst, law):
    """The Deviation by direct summation: (value, lex-first worst sequence, its continued and
    target probabilities), and the continued law's total mass."""
    cont = continued_sequence_law(inst, law)
    best = None
    for seq in sorted(cont):
        target = target_sequence_probability(inst, seq)
        dev = abs(cont[seq] - target)
        if best is None or dev > best[0]:
            best = (dev, seq, cont[seq], target)
    return best, sum(cont.values())


@given(CONTROLS_BY_NAME["sample_last"].strategy | CONTROLS_BY_NAME["self_proxy"].strategy | cases(cap=300))
def test_max_deviation_equals_brute_force(case):
    inst = load_case(case)
    law = class_cycle_law(inst, count_draws=False).law
    dev = max_deviation(inst, law)
    (best, arg, _, _), total = brute_force(inst, law)
    assert total == 1
    assert dev.value == best and dev.sequence == arg


@given(cases(cap=300))
def test_float64_is_lossless(case):
    fl = certify(load_case({**case, "arithmetic": "float64"}), count_draws=False)
    assert fl.lossless and float(fl.deviation.value) <= 1e-12


@given(cases(cap=300, dyadic_draft=True))
def test_float64_agrees_with_exact_when_scores_are_float_exact(case):
    """With dyadic draft laws every path score is exact in float64, so both arithmetics
    build the same trees (see the next test for what happens otherwise). Not with draft_top_k:
    it renormalizes the kept entries, (1/4, 1/8) to (2/3, 1/3), and the scores are no longer
    float-exact (Hypothesis found such a case: Top-K, draft_top_k 2, equal class counts, one
    tree different), so it is left out here."""
    case = {k: v for k, v in case.items() if k != "draft_top_k"}
    exact = certify(load_case(case), count_draws=False)
    fl = certify(load_case({**case, "arithmetic": "float64"}), count_draws=False)
    assert fl.lossless and float(fl.deviation.value) <= 1e-12
    assert fl.cycle.classes == exact.cycle.classes
    for o, p in exact.cycle.law.items():
        assert abs(fl.cycle.law.get(o, 0.0) - float(p)) <= 1e-12


def test_float64_breaks_exact_ties_by_rounding_and_stays_lossless():
    """Nodes 1.0 and 0.1 both score exactly 2/9 (1/2 * 4/9 = 2/5 * 5/9); exact arithmetic
    breaks the tie by slot path and keeps 0.1, float64 rounds 2/5 * 5/9 up and keeps 1.0.
    Both are lossless: float64 is a different (valid) tree builder at exact ties."""
    case = {
        "vocab_size": 3,
        "target": {"*": ["1/3", "1/3", "1/3"]},
        "draft": {"": ["1/2", "2/5", "1/10"], "*": ["5/9", "4/9", "0"]},
        "policy": "topk",
        "K": 2,
        "depth": 2,
        "budget": 4,
        "beam": 2,
    }
    exact = certify(load_case(case))
    fl = certify(load_case({**case, "arithmetic": "float64"}))
    assert exact.lossless and fl.lossless
    kept = lambda r: sorted(n[0] for n in next(iter(r.cycle.trees)).nodes)
    assert kept(exact) == [(0,), (0, 0), (0, 1), (1,)]
    assert kept(fl) == [(0,), (0, 0), (1,), (1, 0)]


def test_float64_any_temperature_is_lossless():
    case = {
        "vocab_size": 3,
        "target": {"*": [0.2, 0.5, 0.3]},
        "draft": {"*": [0.5, 0.3, 0.2]},
        "policy": "rheo",
        "K": 2,
        "m": 1,
        "depth": 2,
        "budget": 3,
        "temperature": 0.7,
        "arithmetic": "float64",
    }
    r = certify(load_case(case))
    assert r.lossless and 1 < r.tau < 3


def test_counting_joint_draws_can_be_capped_without_touching_the_law():
    from rheo.reference.generate import hashed_instance

    inst = lambda: hashed_instance(4, 0, policy="rheo", K=3, m=1, depth=5, budget=10)
    capped = certify(inst(), count_seconds=1e-4)
    full = certify(inst(), count_seconds=60)
    assert capped.cycle.joint_draws is None and full.cycle.joint_draws == 3**13
    assert capped.cycle.law == full.cycle.law and capped.lossless


def test_cycle_law_summaries_on_a_hand_written_law():
    """CycleLaw's totals (docs/spec.md §5): root acceptance is Pr(|O| >= 2), tau is E|O|."""
    from fractions import Fraction as F

    from rheo.reference.cycle import CycleLaw

    law = CycleLaw({(0,): F(1, 4), (1, 2): F(1, 2), (1, 0, 2): F(1, 4)}, joint_draws=None, classes=1)
    assert law.total() == 1
    assert law.root_acceptance() == F(3, 4)
    assert law.tau() == F(1, 4) + 2 * F(1, 2) + 3 * F(1, 4)
    assert law.first_token_law(3) == [F(1, 4), F(3, 4), 0]


def test_report_json_of_a_top_k_tree_by_hand():
    """Top-K at depth 1 on p = (1/5, 1/2, 3/10), draft ranking 0, 1, 2, budget 2: token 0
    is accepted w.p. 1/5, else token 1 w.p. (1/2)/(4/5) = 5/8 of the rest, else the residual
    is the point mass on 2; an accepted child is followed by a bonus token from p. So
    Pr(|O| = 2) = 1/5 + 1/2 = 7/10, tau = 17/10, and the cycle law is written out below."""
    t, q = ["1/5", "1/2", "3/10"], ["1/2", "3/10", "1/5"]
    report = certify(make_instance(3, t, q, policy="topk", K=3, depth=1, budget=2))
    report.extras["note"] = "kept"
    out = report.to_json()
    assert out == {
        "lossless": True,
        "max_abs_deviation": "0",
        "worst_sequence": [0, 0],  # every deviation is 0: the first sequence of V^(D+1)
        "worst_continued": "1/25",
        "worst_target": "1/25",
        "tau": "17/10",
        "root_acceptance": "7/10",
        "joint_draws": 1,
        "classes": 1,
        "enumerator": "classes",
        "arithmetic": "exact",
        "first_token_law": ["1/5", "1/2", "3/10"],
        "cycle_law": {
            "0 0": "1/25",
            "0 1": "1/10",
            "0 2": "3/50",
            "1 0": "1/10",
            "1 1": "1/4",
            "1 2": "3/20",
            "2": "3/10",
        },
        "note": "kept",
    }
    f = certify(make_instance(3, t, q, policy="topk", K=3, depth=1, budget=2, arithmetic="float64")).to_json()
    assert f["lossless"] is True and f["arithmetic"] == "float64" and 0 <= f["max_abs_deviation"] < 1e-15
    assert f["tau"] == pytest.approx(1.7) and f["root_acceptance"] == pytest.approx(0.7)
    assert f["first_token_law"] == pytest.approx([0.2, 0.5, 0.3]) and type(f["tau"]) is float
    assert list(f["cycle_law"]) == list(out["cycle_law"])
    # a lossy proxy: the worst sequence's two probabilities differ by the deviation
    lossy = certify(make_instance(3, t, q, policy="rheo", K=3, m=1, depth=1, budget=2, proxy={"constant": "1/4"}))
    j = lossy.to_json()
    assert j["lossless"] is False and not lossy.lossless
    assert abs(Fraction(j["worst_continued"]) - Fraction(j["worst_target"])) == Fraction(j["max_abs_deviation"]) > 0
    assert "worst_sequence" in j and len(j["worst_sequence"]) == 2


def test_a_cycle_law_leaves_out_outputs_of_probability_zero():
    # the draft's top token has target probability 0: it is never accepted
    report = certify(make_instance(2, ["0", "1"], ["3/4", "1/4"], policy="topk", K=1, depth=1, budget=1))
    assert report.to_json()["cycle_law"] == {"1": "1"}
    assert report.to_json()["tau"] == "1"


CORPUS = sorted((Path(__file__).resolve().parent.parent / "cases").glob("*.json"))


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_every_field_of_the_deviation_equals_brute_force_on_the_lossy_corpus(path):
    """The corpus holds lossy cases (every control's counterexample): deviations > 0, whose
    worst sequences the pruned search must find by its best continuations."""
    for case in (read_case(path), {**read_case(path), "arithmetic": "float64"}):
        inst = load_case(case)
        law = class_cycle_law(inst, count_draws=False).law
        dev = max_deviation(inst, law)
        (value, seq, continued, target), _ = brute_force(inst, law)
        assert dev.sequence == seq, path.stem
        if inst.exact:
            assert (dev.value, dev.continued, dev.target) == (value, continued, target) and value > 0
        else:
            assert (dev.value, dev.continued, dev.target) == pytest.approx((value, continued, target), abs=1e-12)
        assert abs(dev.continued - dev.target) == pytest.approx(dev.value, abs=1e-15)


def test_short_outputs_are_settled_by_their_likeliest_continuation():
    """Depth 2 with a constant proxy: outputs of length 1 (a rejection at the root) are not
    extended by any other output, so their deviation is (A(s) - p_T(s)) times the likeliest
    continuation's probability; the brute force agrees on every field."""
    case = {
        "vocab_size": 3,
        "target": {"*": ["1/5", "1/2", "3/10"], "1": ["1/2", "1/3", "1/6"]},
        "draft": {"*": ["1/2", "3/10", "1/5"]},
        "policy": "rheo",
        "K": 3,
        "m": 1,
        "depth": 2,
        "budget": 2,
        "beam": 1,
        "proxy": {"constant": "1/4"},
    }
    inst = load_case(case)
    law = class_cycle_law(inst, count_draws=False).law
    assert (2,) in law and not any(len(o) > 1 and o[0] == 2 for o in law)  # (2,): no output extends it
    d = CountingDeadline()
    with inst.bounded(d):
        dev = max_deviation(inst, law)
    (value, seq, continued, target), _ = brute_force(inst, law)
    assert (dev.value, dev.sequence, dev.continued, dev.target) == (value, seq, continued, target)
    assert value > 0
    assert d.checked["searching the likeliest continuation"] >= 3  # below (2,): its 3 tokens


def test_the_likeliest_continuation_search_looks_only_where_the_best_can_change():
    """The search's two bounds, counted by its deadline checks (one per token looked at).

    The outputs are given by hand: all mass on (0,), at depth 2 (sequences of 3 tokens), with
    p_T = (2/5, 3/10, 3/10) at the root, (0, 1/2, 1/2) after 0 and (1, 0, 0) after 0,1.
    - (0,): deviation |1 - 2/5| = 3/5, beating 0, so its continuations are searched (3 tokens).
      Token 0 has p_T 0: skipped. Token 1 (1/2) is searched: (0,1) has 3 tokens, the best is
      1/2 * 1 (token 0). Token 2's 1/2 cannot beat that 1/2 (p_T(x) bounds what x can reach):
      skipped. So 3 + 3 checks, and the best is 3/5 * 1/2 = 3/10 at (0, 1, 0).
    - (1,) and (2,): deviation 3/10 each, which cannot beat 3/10 (a continuation only shrinks
      it): not searched.
    A search that also looked at zero-probability tokens, at ties, or below prefixes whose
    deviation only equals the best would count more checks; the answer would not change.
    """
    case = {
        "vocab_size": 3,
        "target": {"*": ["2/5", "3/10", "3/10"], "0": ["0", "1/2", "1/2"], "0,1": ["1", "0", "0"]},
        "draft": {"*": ["1/3", "1/3", "1/3"]},
        "policy": "rheo",
        "K": 2,
        "m": 1,
        "depth": 2,
        "budget": 2,
        "beam": 1,
    }
    inst = load_case(case)
    d = CountingDeadline()
    with inst.bounded(d):
        dev = max_deviation(inst, {(0,): Fraction(1)})
    assert (dev.value, dev.sequence, dev.continued, dev.target) == (
        Fraction(3, 10),
        (0, 1, 0),
        Fraction(1, 2),
        Fraction(1, 5),
    )
    assert d.checked["searching the likeliest continuation"] == 6
    assert d.checked["comparing sequences with p_T"] == 3  # the root's tokens: only () is extended

    # the likeliest continuation need not start with the likeliest token: after 0, token 1 (1/2)
    # then 0 (1/2) reaches 1/4; token 2 (2/5) then 0 (5/8) reaches 1/4 too, a tie that the
    # lex-first continuation (1, 0) wins. So the best is 3/5 * 1/4 = 3/20 at (0, 1, 0).
    # ((1,) and (2,), deviation 3/10, reach at most 3/10 * 2/5 * 2/5 = 6/125 below them.)
    tables = {"0": ["1/10", "1/2", "2/5"], "0,1": ["1/2", "1/2", "0"], "0,2": ["5/8", "3/8", "0"]}
    second = load_case({**case, "target": {"*": case["target"]["*"], **tables}})
    dev = max_deviation(second, {(0,): Fraction(1)})
    assert (dev.value, dev.sequence, dev.continued, dev.target) == (
        Fraction(3, 20),
        (0, 1, 0),
        Fraction(1, 4),
        Fraction(1, 10),
    )

    # a lossless law: every unextended prefix has deviation 0, which beats nothing: no search
    lossless = load_case({**case, "target": {"*": ["1/5", "1/2", "3/10"]}, "draft": {"*": ["1/2", "3/10", "1/5"]}})
    d = CountingDeadline()
    with lossless.bounded(d):
        dev = max_deviation(lossless, class_cycle_law(lossless, count_draws=False).law)
    assert dev.value == 0 and "searching the likeliest continuation" not in d.checked


def test_the_deviation_search_reads_the_deadline_in_each_loop_and_reports_its_share():

    inst = load_case(read_case(CORPUS[0].parent / "paper-abc-constant-proxy.json"))
    law = class_cycle_law(inst, count_draws=False).law
    inst.target_law(())
    d = CountingDeadline()
    with inst.bounded(d):
        max_deviation(inst, law)
    # one check per output listed; one per token below each prefix some output extends
    # (the prefixes compared token by token); the stack once per call
    extended = {o[:k] for o in law for k in range(len(o))}
    assert d.checked["listing the prefixes of outputs"] == len(law)
    assert d.checked["comparing sequences with p_T"] == 3 * len(extended)
    assert d.checked["sequences compared"] >= 1 + d.checked["comparing sequences with p_T"]  # a call per token
    assert d.shares["sequences compared"] == pytest.approx(1.0)  # every sequence settled, shares summing to 1


def test_cycle_law_dispatches_by_enumerator_name():
    """Both enumerators give the same law; the default is the class enumerator, counting
    joint draws (docs/spec.md §5); an unknown name is refused."""
    from rheo.reference import cycle_law
    from rheo.reference.enumerate_classes import count_joint_draws
    from rheo.reference.enumerate_naive import naive_cycle_law

    inst = load_case(read_case(CORPUS[0].parent / "paper-abc-constant-proxy.json"))
    naive, classes = cycle_law(inst, "naive"), cycle_law(inst)
    assert naive.enumerator == "naive" and classes.enumerator == "classes"
    assert naive.law == classes.law == naive_cycle_law(inst).law
    assert classes.joint_draws == naive.joint_draws == count_joint_draws(inst) > 1
    assert cycle_law(inst, "classes", count_draws=False).joint_draws is None
    with pytest.raises(ValueError, match='enumerator must be "classes" or "naive"'):
        cycle_law(inst, "NAIVE")


def test_the_class_enumerator_counts_its_leaves_and_share_in_each_check():
    inst = load_case(read_case(CORPUS[0].parent / "control-class_law_depth2.json"))
    counts: list[tuple[int | None, str, float | None]] = []

    class Recording(Deadline):
        def check(self, count, what="joint draws", share=None):
            if what == "class-enumerator branches":
                counts.append((count, what, share))
            super().check(count, what, share)

    law = class_cycle_law(inst, count_draws=False, deadline=Recording(None))
    leaves = [c for c, _, _ in counts]
    assert leaves == list(range(1, len(leaves) + 1)) and len(leaves) >= law.classes  # one check per leaf, counted
    shares = [s for _, _, s in counts]
    assert all(s is not None for s in shares) and shares == sorted(shares) and shares[-1] == pytest.approx(1.0)


def test_dead_nodes_are_skipped_and_lazy_groups_listed_at_the_end():
    """docs/spec.md §5's two savings of the class enumerator, on a generated case that has both
    (vocab 3, K 2, m 1, depth 2, budget 3, beam 2, seed 2):
    - a node with budget nodes ahead of it is not expanded (``comparing order keys``), so the
      enumerator finishes fewer branches than without the skip, with the same law;
    - a lazy group that survives pruning is listed token by token when its branch ends
      (``listing the trees of a branch``), and the joint draws stay an integer count.
    Each loop is paced by the deadline under its own name."""
    from rheo.reference.enumerate_classes import _Explorer, count_joint_draws
    from rheo.reference.enumerate_naive import naive_cycle_law
    from rheo.reference.generate import hashed_instance

    inst = hashed_instance(3, 2, policy="rheo", K=2, m=1, depth=2, budget=3, beam=2)
    leaves, checked = {}, {}
    for skip in (True, False):
        d = CountingDeadline()
        explorer = _Explorer(inst, skip_dead=skip, on_leaf=lambda *leaf: None, deadline=d)
        explorer.run()
        leaves[skip], checked[skip] = explorer.leaves, d.checked
    assert leaves[True] < leaves[False]
    assert checked[True]["comparing order keys"] >= 1 and "comparing order keys" not in checked[False]
    assert checked[True]["listing the trees of a branch"] >= 1
    assert class_cycle_law(inst).law == naive_cycle_law(inst).law
    assert count_joint_draws(inst) == naive_cycle_law(inst).joint_draws
    # beam 1 leaves a lazy group unexpanded in the counting pass too: its branch's joint draws are
    # divided among the group's trees, and stay an integer (a count, printed as one in the JSON)
    # (and with m = 0, the counting pass expands a lazy group: its branches split the count)
    for narrow in (
        hashed_instance(3, 0, policy="rheo", K=2, m=1, depth=2, budget=2, beam=1),
        hashed_instance(3, 0, policy="rheo", K=2, m=0, depth=2, budget=2, beam=1),
    ):
        draws = count_joint_draws(narrow)
        assert type(draws) is int and draws == naive_cycle_law(narrow).joint_draws
    # budget 5: a node with 2 or 3 nodes ahead is not dead (its children can still be among
    # the 5 kept), and must be expanded for the law to be right
    wide = hashed_instance(3, 2, policy="rheo", K=2, m=0, depth=2, budget=5, beam=2)
    assert class_cycle_law(wide, count_draws=False).law == naive_cycle_law(wide).law


def test_certify_and_cycle_law_hand_the_deadline_to_every_phase():
    """``certify(deadline=...)`` bounds the enumeration (naive: one check per joint draw;
    classes: per branch) and the deviation search; ``cycle_law`` hands it to the enumerator it
    names. A phase that dropped it would run unbounded (``rheo exact --timeout``). The report's
    seconds are the time certify took."""
    import time

    from rheo.reference import cycle_law

    inst = load_case(read_case(CORPUS[0].parent / "paper-abc-constant-proxy.json"))
    for enumerator, name in [("naive", "joint draws"), ("classes", "class-enumerator branches")]:
        d = CountingDeadline()
        cycle_law(inst, enumerator, d)
        assert d.checked[name] >= 1, enumerator
        d = CountingDeadline()
        t0 = time.perf_counter()
        report = certify(inst, enumerator, d)
        elapsed = time.perf_counter() - t0
        assert d.checked[name] >= 1 and d.checked["comparing sequences with p_T"] >= 1, enumerator
        assert 0 <= report.seconds <= elapsed


def test_the_naive_enumerator_reads_the_deadline_in_each_phase():
    """One check per joint draw, counted (the progress line's number); the verification of each
    draw's tree (``verified nodes``) and the sum of its law (``summing the verified laws``)
    run under the same deadline, through the instance."""
    from rheo.reference.enumerate_naive import naive_cycle_law

    inst = load_case(read_case(CORPUS[0].parent / "paper-abc-constant-proxy.json"))
    d = CountingDeadline()
    law = naive_cycle_law(inst, d)
    assert law.joint_draws is not None and law.joint_draws > 1
    assert d.checked["joint draws"] == law.joint_draws == d.counts["joint draws"]
    assert d.checked["summing the verified laws"] >= law.joint_draws  # each verified law has an output
    assert d.checked["verified nodes"] >= law.joint_draws
    assert inst.deadline is None  # given back after the enumeration


def _dead_and_lazy():
    """A generated case with dead nodes and lazy groups (see the test above)."""
    from rheo.reference.generate import hashed_instance

    return hashed_instance(3, 2, policy="rheo", K=2, m=1, depth=2, budget=3, beam=2)


def test_the_class_enumerator_reads_the_deadline_in_each_phase():
    """class_cycle_law under a deadline: the enumeration counts its branches (with their
    shares summing to 1), its stack steps and its layers; the classes are verified under it,
    their count known up front; the joint-draw counting pass runs under it too, and
    multiplies the last layer's draws in without branching. A phase that dropped the
    deadline would run unbounded under ``rheo exact --timeout``; a dropped count or share
    would freeze its progress line."""
    from rheo.reference.enumerate_classes import _Explorer

    inst = _dead_and_lazy()
    d = CountingDeadline()
    law = class_cycle_law(inst, deadline=d)
    assert law.joint_draws is not None and law.classes is not None and inst.deadline is None
    branches = d.counts["class-enumerator branches"]
    assert d.checked["class-enumerator branches"] == branches
    assert d.shares["class-enumerator branches"] == pytest.approx(1.0)
    assert d.checked["class-enumerator steps"] >= branches
    assert d.counts["layers built"] == inst.config.depth - 1
    unskipped = _Explorer(inst, skip_dead=False, on_leaf=lambda *leaf: None)
    unskipped.run()
    assert branches < unskipped.leaves  # class_cycle_law skips dead nodes
    assert d.totals["classes verified"] == law.classes
    assert d.checked["classes verified"] == law.classes and d.counts["classes verified"] == law.classes - 1
    assert d.checked["summing the verified laws"] >= law.classes and d.checked["verified nodes"] >= law.classes
    counted = d.counts["joint-draw counting branches"]
    assert d.checked["joint-draw counting branches"] == counted and 1 <= counted < law.joint_draws
    assert d.shares["joint-draw counting branches"] == pytest.approx(1.0)
    assert None not in d.counts and None not in d.totals and None not in d.checked

    # the counting pass skips no node either, but does not branch on the last layer's draws
    from rheo.reference.enumerate_classes import count_joint_draws
    from rheo.reference.generate import hashed_instance

    last_layer = hashed_instance(3, 0, policy="rheo", K=2, m=0, depth=2, budget=2, beam=1)
    d = CountingDeadline()
    count_joint_draws(last_layer, d)
    branching = _Explorer(last_layer, skip_dead=False, on_leaf=lambda *leaf: None)
    branching.run()
    assert d.counts["joint-draw counting branches"] < branching.leaves


def test_the_class_enumerator_reads_the_laws_under_its_deadline(monkeypatch):
    """Computing a node's laws (filters, ranks, residuals: loops over the vocabulary) is bounded
    by the enumerator's deadline, through the instance, in both passes."""
    from rheo.reference.enumerate_classes import count_joint_draws
    from rheo.reference.instance import Instance

    seen = []
    node_laws = Instance.node_laws

    def reading(self, prefix):
        seen.append(self.deadline)
        return node_laws(self, prefix)

    monkeypatch.setattr(Instance, "node_laws", reading)
    for count in (False, True):
        d = CountingDeadline()
        seen.clear()
        if count:
            count_joint_draws(_dead_and_lazy(), d)
        else:
            class_cycle_law(_dead_and_lazy(), count_draws=False, deadline=d)
        assert seen and all(x is d for x in seen), count


def test_the_joint_draw_count_has_its_own_cap_inside_the_deadline(monkeypatch):
    """count_seconds caps the counting pass alone: a Deadline of min(count_seconds, what is
    left of the deadline), with the deadline's progress, pace and heartbeat; without a deadline
    a plain Deadline(count_seconds)."""
    from rheo.reference import enumerate_classes

    made: list[tuple] = []

    class Spy(Deadline):
        def __init__(self, seconds=None, *args):
            made.append((seconds, args))
            super().__init__(seconds, *args)

    monkeypatch.setattr(enumerate_classes, "Deadline", Spy)
    inst = _dead_and_lazy()
    beat = lambda deadline, what: None
    outer = Deadline(1000.0, print, 5.0, beat)
    class_cycle_law(inst, deadline=outer, count_seconds=10**6)
    ((seconds, args),) = made
    assert 990 < seconds <= 1000 and args == (print, 5.0, beat)
    made.clear()
    class_cycle_law(inst, deadline=outer, count_seconds=7.0)
    assert made == [(7.0, (print, 5.0, beat))]
    made.clear()
    class_cycle_law(inst, count_seconds=7.0)
    assert made == [(7.0, ())]

    # a cap already spent: the count is given up (None), the law is kept, and the deadline
    # is read once more to tell its own expiry from the cap's
    monkeypatch.undo()
    d = CountingDeadline()
    law = class_cycle_law(inst, deadline=d, count_seconds=0.0)
    assert law.joint_draws is None and law.law == class_cycle_law(inst, count_draws=False).law
    assert d.checked["while counting joint draws"] == 1 and "while counting joint draws" not in d.counts


def test_the_class_enumerator_groups_each_prefix_once_and_paces_the_grouping(monkeypatch):
    """The draw groups at a prefix are a function of the prefix: made once, then reused in
    every branch that expands a node there. Making them reads the deadline once per entry of
    each loop: the residual support, the draws (twice: singles, then the tail beyond the fills),
    with the "self" proxy the tail again (split by q), and the tail's masses after the first
    (the group's total)."""
    from collections import Counter

    from rheo.reference import enumerate_classes
    from rheo.reference.enumerate_classes import _Explorer
    from rheo.reference.generate import hashed_instance

    made: Counter = Counter()
    make = _Explorer._make_groups

    def counting(self, laws):
        made[laws.prefix] += 1
        return make(self, laws)

    used: Counter = Counter()
    groups = _Explorer._groups

    def using(self, laws):
        used[laws.prefix] += 1
        return groups(self, laws)

    monkeypatch.setattr(enumerate_classes._Explorer, "_make_groups", counting)
    monkeypatch.setattr(enumerate_classes._Explorer, "_groups", using)
    many = hashed_instance(4, 1, policy="rheo", K=3, m=1, depth=3, budget=4, beam=2)  # 72 branches
    class_cycle_law(many, count_draws=False)
    assert set(made) == set(used) and set(made.values()) == {1} and max(used.values()) > 1
    monkeypatch.undo()

    for proxy in ("rheo", "self"):
        inst = hashed_instance(4, 1, policy="rheo", K=2, m=1, depth=1, budget=2, proxy=proxy)
        laws = inst.node_laws(())
        rs, f = laws.residual_support, laws.fill_count
        tail = [u for u, _ in laws.draws if rs.index(u) >= f]
        parts = (
            [tail]
            if proxy == "rheo"
            else list({laws.q[u]: [t for t in tail if laws.q[t] == laws.q[u]] for u in tail}.values())
        )
        assert len(tail) >= 2 and (proxy == "rheo" or any(len(p) >= 2 for p in parts) or len(parts) >= 2)
        d = CountingDeadline()
        groups = _Explorer(inst, skip_dead=True, on_leaf=lambda *leaf: None, deadline=d)._make_groups(laws)
        by_q = len(tail) if proxy == "self" else 0
        assert d.checks == len(rs) + 2 * len(laws.draws) + by_q + sum(len(p) - 1 for p in parts), proxy
        assert sorted(len(tokens) for tokens, _, _ in groups) == sorted(
            [1] * (len(laws.draws) - len(tail)) + [len(p) for p in parts]
        )
