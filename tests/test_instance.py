"""docs/spec.md §2: the candidate pool of one expanded node."""

from fractions import Fraction as F

import pytest

from rheo.reference import CaseError, make_instance


def inst(q, **kw):
    n = len(q)
    base = dict(policy="rheo", K=3, m=1, depth=1, budget=3)
    base.update(kw)
    return make_instance(n, [F(1, n)] * n, q, **base)


def test_leads_residual_fills_and_rheo_proxy():
    laws = inst(["2/5", "1/5", "3/10", "1/10"]).node_laws(())
    assert laws.ranked == [0, 2, 1, 3]
    assert laws.leads == [0] and laws.residual_support == [2, 1, 3]
    assert laws.residual == (0, F(1, 3), F(1, 2), F(1, 6))
    assert laws.proxy == min(F(2, 5), F(3, 5))
    assert laws.fills(2) == [1] and laws.fills(1) == [2] and laws.fills(3) == [2]
    pool = laws.pool(3)
    assert [(s, t, k) for s, t, k, _ in pool] == [(0, 0, "lead"), (1, 3, "sample"), (2, 2, "fill")]


def test_m0_proxy_is_top_probability_plus_epsilon_capped_at_one():
    assert inst(["2/5", "1/5", "3/10", "1/10"], m=0).node_laws(()).proxy == F(2, 5)
    assert inst(["2/5", "1/5", "3/10", "1/10"], m=0, epsilon="1/10").node_laws(()).proxy == F(1, 2)
    assert inst(["2/5", "1/5", "3/10", "1/10"], m=0, epsilon="1").node_laws(()).proxy == 1


def test_residual_at_temperature_zero_is_one_hot_on_best_non_lead():
    laws = inst(["2/5", "1/5", "3/10", "1/10"], temperature="0").node_laws(())
    assert laws.residual == (0, 0, 1, 0)
    assert laws.draws == [(2, 1)]


def test_residual_is_restricted_then_tempered():
    laws = inst(["1/2", "1/4", "1/4", "0"], temperature="1/2").node_laws(())
    assert laws.residual == (0, F(1, 2), F(1, 2), 0)
    laws = inst(["1/2", "1/6", "1/3", "0"], temperature="1/2").node_laws(())
    assert laws.residual == (0, F(1, 5), F(4, 5), 0)


def test_draft_top_k_truncates_before_everything():
    laws = inst(["2/5", "1/5", "3/10", "1/10"], draft_top_k=2).node_laws(())
    assert laws.q == (F(4, 7), 0, F(3, 7), 0)
    assert laws.residual_support == [2]
    assert laws.fills(2) == []


def test_short_support_gives_short_pool():
    laws = inst(["1/2", "1/2", "0", "0"], K=4, m=2).node_laws(())
    assert laws.residual_support == [] and laws.pool(None) == [(0, 0, "lead", F(1, 2)), (1, 1, "lead", F(1, 2))]


def test_topk_pool_is_first_k_ranked():
    laws = inst(["2/5", "1/5", "3/10", "1/10"], policy="topk", K=2).node_laws(())
    assert [(s, t) for s, t, _, _ in laws.pool()] == [(0, 0), (1, 2)]


def test_self_and_constant_proxies():
    laws = inst(["2/5", "1/5", "3/10", "1/10"], proxy="self").node_laws(())
    assert laws.proxy is None and laws.sample_factor(3) == F(1, 10)
    laws = inst(["2/5", "1/5", "3/10", "1/10"], proxy={"constant": "1/4"}).node_laws(())
    assert laws.sample_factor(3) == F(1, 4)


def test_missing_prefix_is_named():
    i = make_instance(2, {"": ["1/2", "1/2"]}, {"": ["1/3", "2/3"]}, policy="rheo", K=2, m=0, depth=2, budget=2)
    from rheo.reference import certify

    with pytest.raises(CaseError, match=r'draft\["1"\]'):
        certify(i)


@pytest.mark.parametrize(
    "kw,field",
    [
        ({"m": 3}, "m"),
        ({"budget": 0}, "budget"),
        ({"K": 0}, "K"),
        ({"proxy": {"constant": "3/2"}}, "proxy.constant"),
        ({"tie_break": "id"}, "tie_break"),
        ({"verify": "x"}, "verify"),
    ],
)
def test_bad_configuration_names_the_field(kw, field):
    with pytest.raises(CaseError) as err:
        inst(["1/2", "1/2"], **kw)
    assert err.value.field == field


def test_rank_bound_is_q_of_the_first_residual_token():
    """Lemma 1's bound q(x_{m+1}) (docs/spec.md §2), and None where nothing is left after the leads."""
    assert inst(["2/5", "1/5", "3/10", "1/10"]).rank_bound(()) == F(3, 10)
    assert inst(["2/5", "1/5", "3/10", "1/10"], m=2).rank_bound(()) == F(1, 5)
    assert inst(["1/2", "1/2", "0", "0"], K=4, m=2).rank_bound(()) is None


def test_a_bad_table_entry_names_its_index_and_the_table_keeps_its_name():
    with pytest.raises(CaseError) as err:
        inst(["2/5", "1/5", "oops", "1/10"])
    assert err.value.field == "draft[2]"
    assert inst(["2/5", "1/5", "3/10", "1/10"]).draft.name == "draft"


def test_reading_a_table_reads_the_deadline_per_entry():
    """Each table entry is paced (``rheo exact`` bounds reading a huge table): one check
    per entry read, per table, in exact mode."""
    from .deadlines import CountingDeadline

    exact, floats = CountingDeadline(), CountingDeadline()
    make_instance(
        4,
        [F(1, 4)] * 4,
        ["2/5", "1/5", "3/10", "1/10"],
        deadline=exact,
        **dict(policy="rheo", K=3, m=1, depth=1, budget=3),
    )
    assert exact.checks == 8
    make_instance(  # float64: each entry read, then converted
        4,
        [F(1, 4)] * 4,
        ["2/5", "1/5", "3/10", "1/10"],
        deadline=floats,
        **dict(policy="rheo", K=3, m=1, depth=1, budget=3, arithmetic="float64"),
    )
    assert floats.checks == 16


def test_make_instance_names_callable_tables_and_bad_prefix_keys():
    t = make_instance(3, lambda prefix: (F(1, 3),) * 3, ["1/3"] * 3, policy="rheo", K=2, m=1, depth=1, budget=2)
    assert t.target.name == "target" and t.target((1,)) == (F(1, 3),) * 3
    with pytest.raises(CaseError) as err:
        make_instance(3, {"0,x": ["1/3"] * 3}, ["1/3"] * 3, policy="rheo", K=2, m=1, depth=1, budget=2)
    assert err.value.field == "target"


def test_make_instance_reads_float64_tables_as_floats_and_refuses_two_configurations():
    f64 = inst(["2/5", "1/5", "3/10", "1/10"], arithmetic="float64")
    assert f64.draft(()) == (0.4, 0.2, 0.3, 0.1) and all(type(x) is float for x in f64.draft(()))
    params = inst(["2/5", "1/5", "3/10", "1/10"]).config
    with pytest.raises(CaseError) as err:
        make_instance(4, ["1/4"] * 4, ["1/4"] * 4, params, K=2)
    assert err.value.field == "K" and "either as params or as keywords" in err.value.message


@pytest.mark.parametrize("arithmetic", ["exact", "float64"])
def test_make_instance_reads_tables_by_prefix_with_a_default(arithmetic):
    """The Python API's tables (``make_instance``): tuple and "0,1" keys, a "*" default; a bad
    entry names its table, prefix and index, in either arithmetic."""
    num = F if arithmetic == "exact" else lambda a, b=1: a / b
    target = {"*": ["1/3", "1/3", "1/3"], (0,): ["1/2", "1/2", "0"], "1,2": ["0", "1/4", "3/4"]}
    t = make_instance(3, target, ["1/3"] * 3, policy="rheo", K=2, m=1, depth=2, budget=3, arithmetic=arithmetic)
    assert t.target(()) == (num(1, 3),) * 3 and t.target((2, 2)) == (num(1, 3),) * 3
    assert t.target((0,)) == (num(1, 2), num(1, 2), num(0))
    assert t.target((1, 2)) == (num(0), num(1, 4), num(3, 4))
    assert all(type(x) is (F if arithmetic == "exact" else float) for x in t.target((1, 2)))
    for bad, field in [({"*": ["1/3", "x", "1/3"]}, 'target["*"][1]'), ({(0,): ["1/2", "1/2", "x"]}, 'target["0"][2]')]:
        with pytest.raises(CaseError) as err:
            make_instance(3, bad, ["1/3"] * 3, policy="rheo", K=2, m=1, depth=1, budget=2, arithmetic=arithmetic)
        assert err.value.field == field


def test_raw_target_logits_of_a_probability_table_are_log_p():
    """An implementation that asks for raw logits of a probability-table case gets log p,
    -inf where p = 0 (docs/spec.md §9); a logits table's own values otherwise."""
    import math

    from rheo.casefile import load_case

    for arithmetic in ("exact", "float64"):
        inst = make_instance(
            3, ["1/2", "0", "1/2"], ["1/3"] * 3, policy="rheo", K=2, m=1, depth=1, budget=2, arithmetic=arithmetic
        )
        logits = inst.raw_target_logits(())
        assert logits == (math.log(0.5), -math.inf, math.log(0.5)) and all(type(x) is float for x in logits)
    case = {
        "vocab_size": 3,
        "target_logits": {"*": [1, "-inf", 0], "0": [2, 1, 0]},
        "draft": {"*": ["1/3"] * 3},
        "policy": "rheo",
        "K": 2,
        "m": 1,
        "depth": 2,
        "budget": 3,
        "arithmetic": "float64",
        "presence_penalty": 0.5,
    }
    inst = load_case(case)
    assert inst.raw_target_logits(()) == (1.0, -math.inf, 0.0) and inst.raw_target_logits((0,)) == (2.0, 1.0, 0.0)
    assert all(type(x) is float for x in inst.raw_target_logits((0,)))


def test_check_logits_names_the_entry():
    from rheo.reference.instance import check_logits

    check_logits((0.0, float("-inf")), 2, "t")  # fine
    for logits, field, text in [
        ((0.0,), "t", "must have vocab_size = 2 entries, got 1"),
        ((0.0, float("nan")), "t[1]", 'must be a finite number or "-inf", got nan'),
        ((float("inf"), 0.0), "t[0]", 'must be a finite number or "-inf", got inf'),
        ((float("-inf"),) * 2, "t", 'every entry is "-inf": no token has probability > 0'),
    ]:
        with pytest.raises(CaseError) as err:
            check_logits(logits, 2, "t")
        assert (err.value.field, err.value.message) == (field, text)


def test_raw_logits_are_checked_once_per_prefix_and_at_every_prefix(monkeypatch):
    """A logits table is checked the first time each prefix is read, and only then: a bad
    entry at a second prefix is still found (a cache keyed wrongly would let it through), and
    reading a prefix again does not check it again (the check is O(vocab_size) per read)."""
    import math

    from rheo.reference import instance as instance_module
    from rheo.reference.instance import Instance, Table

    seen: list[tuple[str, int]] = []
    check = instance_module.check_logits

    def counting(logits, n, name):
        seen.append((name, len(logits)))
        check(logits, n, name)

    monkeypatch.setattr(instance_module, "check_logits", counting)
    logits = Table("target_logits", {}, fn=lambda prefix: (math.nan, 0.0) if prefix == (1,) else (0.0, -1.0))
    draft = Table("draft", {}, default=(F(1, 2), F(1, 2)))
    config = make_instance(
        2, ["1/2"] * 2, ["1/2"] * 2, policy="rheo", K=2, m=1, depth=2, budget=2, arithmetic="float64"
    ).config
    inst = Instance(2, None, draft, config, target_logits=logits)
    for _ in range(2):
        assert inst.raw_target_logits(()) == (0.0, -1.0) and inst.raw_target_logits((0,)) == (0.0, -1.0)
    assert seen == [('target_logits[""]', 2), ('target_logits["0"]', 2)]
    with pytest.raises(CaseError) as err:
        inst.raw_target_logits((1,))
    assert err.value.field == 'target_logits["1"][0]'


def test_the_target_law_is_computed_under_the_instance_deadline():
    """p_T at a prefix is the tempered law through the filters, and both stages read the
    instance's deadline: its checks are exactly those of temper plus those of apply_filters."""
    from rheo.reference.numbers import apply_filters, temper

    from .deadlines import CountingDeadline

    inst = make_instance(
        4,
        ["2/5", "3/10", "1/5", "1/10"],
        ["1/4"] * 4,
        policy="rheo",
        K=2,
        m=1,
        depth=1,
        budget=2,
        temperature="1/2",
        target_top_k=3,
    )
    base = inst.base_target_law(())  # checked (and cached as checked) here
    t, f = CountingDeadline(), CountingDeadline()
    apply_filters(temper(base, inst.config.temperature, t), inst.config.target_filters, f)
    d = CountingDeadline()
    with inst.bounded(d):
        law = inst.target_law(())
    assert law == apply_filters(temper(base, inst.config.temperature), inst.config.target_filters)
    assert t.checks > 0 and f.checks > 0 and d.checks == t.checks + f.checks


def test_a_per_prefix_proxy_falls_back_to_its_default_and_names_a_missing_prefix():
    """proxy {"per_prefix": {...}}: the value listed at a prefix, else the "*" default; a prefix
    with neither is refused when the computation reaches it, naming the prefix."""
    table = {"": "1/2", "*": "1/4"}
    config = dict(policy="rheo", K=2, m=0, depth=2, budget=2)
    listed = make_instance(3, ["1/3"] * 3, ["1/2", "1/4", "1/4"], proxy={"per_prefix": table}, **config)
    assert listed.node_laws(()).proxy == F(1, 2) and listed.node_laws((1,)).proxy == F(1, 4)
    bare = make_instance(3, ["1/3"] * 3, ["1/2", "1/4", "1/4"], proxy={"per_prefix": {"": "1/2"}}, **config)
    assert bare.node_laws(()).proxy == F(1, 2)
    with pytest.raises(CaseError) as err:
        bare.node_laws((1,))
    assert err.value.field == 'proxy.per_prefix["1"]' and 'give it or a "*" default' in err.value.message


def test_a_callable_proxy_is_asked_at_each_prefix_with_its_laws():
    """proxy=fn (the Python API): fn(prefix, node laws) gives the sample's factor at each
    node; it sees the prefix and that node's laws (here it returns q of the first lead plus
    a tenth of the prefix's length, so a wrong argument shows)."""
    from rheo.reference.params import Proxy

    asked = []

    def fn(prefix, laws):
        asked.append((prefix, laws.prefix))
        return laws.q[laws.leads[0]] + F(len(prefix), 10)

    config = dict(policy="rheo", K=2, m=1, depth=2, budget=2)
    inst = make_instance(3, ["1/3"] * 3, ["1/2", "1/4", "1/4"], proxy=Proxy("callable", fn=fn), **config)
    assert inst.node_laws(()).proxy == F(1, 2) and inst.node_laws((2,)).proxy == F(1, 2) + F(1, 10)
    assert asked == [((), ()), ((2,), (2,))]


NODE_CASES = {
    "topk, draft_top_k 3": dict(policy="topk", K=2, draft_top_k=3),
    "rheo, T 1/2": dict(K=3, m=1, temperature="1/2"),
    "rheo, dense draft law": dict(K=3, m=1, temperature="1/2", draft_law="dense"),
    "rheo, untempered draft law": dict(K=3, m=1, temperature="1/2", draft_law="untempered"),
}


@pytest.mark.parametrize("name", sorted(NODE_CASES))
def test_the_node_laws_are_computed_under_the_instance_deadline(name):
    """Every loop that makes a node's laws reads the instance's deadline (``rheo exact`` stops
    in the middle of a huge vocabulary): the checks are exactly those of its stages, each
    counted on its own: reading the draft law once, draft_top_k, the ranking, the residual's
    restriction (one per entry) and tempering, the draws (one per residual token), and the
    dense or untempered residual of a control. A stage that drops the deadline lowers the
    count; a law checked twice, or not at all, changes it too. Which an already-expired
    deadline would not show: the first stage would stop it."""
    from rheo.reference.instance import check_law
    from rheo.reference.numbers import keep_top_k, rank_order, temper
    from rheo.reference.params import UNTEMPERED

    from .deadlines import CountingDeadline

    q_raw = (F(2, 5), F(1, 5), F(3, 10), F(1, 10))
    n = len(q_raw)
    i = inst([str(x) for x in q_raw], **NODE_CASES[name])
    c = i.config
    _ = i.one  # the target law at the root, read (and checked) before the count

    def checks(run):
        d = CountingDeadline()
        run(d)
        return d.checks

    expected = checks(lambda d: check_law(q_raw, n, True, "draft", d))
    q = keep_top_k(q_raw, c.draft_top_k) if c.draft_top_k is not None else q_raw
    expected += checks(lambda d: keep_top_k(q_raw, c.draft_top_k, d)) if c.draft_top_k is not None else 0
    expected += checks(lambda d: rank_order(q, d))
    if c.policy == "rheo":
        support = rank_order(q)[c.m :]
        restricted = [x if t in support else 0 for t, x in enumerate(q)]
        expected += n + checks(lambda d: temper(restricted, c.temperature, d)) + len(support)
        if c.draft_law == "dense":
            dense = [0 if t in rank_order(q)[: c.m] else x for t, x in enumerate(q_raw)]
            expected += n + checks(lambda d: temper(dense, c.temperature, d))
        if c.draft_law == "untempered":
            expected += n + checks(lambda d: temper(restricted, UNTEMPERED, d))
    d = CountingDeadline()
    with i.bounded(d):
        laws = i.node_laws(())
    assert laws.prefix == () and laws.ranked == rank_order(q)
    assert d.checks == expected, (d.checks, expected)
    with i.bounded(d):
        i.node_laws(())  # made once per prefix
    assert d.checks == expected


def test_the_node_laws_of_topk_and_of_a_node_with_no_residual():
    """The fields a Top-K node and a Rheo node whose leads take every positive token carry:
    no residual, no draws, and the fill count (0 for Top-K; K - m - 1 for Rheo, here
    4 - 2 - 1 = 1, though nothing is left to fill with)."""
    topk = inst(["2/5", "1/5", "3/10", "1/10"], policy="topk", K=2).node_laws((1,))
    assert (topk.prefix, topk.ranked, topk.leads) == ((1,), [0, 2, 1, 3], [0, 2])
    assert (topk.residual_support, topk.residual, topk.draws, topk.proxy, topk.fill_count) == ([], None, [], None, 0)
    short = inst(["1/2", "1/2", "0", "0"], K=4, m=2).node_laws((0,))
    assert (short.prefix, short.ranked, short.leads) == ((0,), [0, 1], [0, 1])
    empty = (short.residual_support, short.residual, short.draws, short.proxy, short.fill_count)
    assert empty == ([], None, [], None, 1)


def test_each_law_is_checked_once_per_table_and_prefix():
    """A table law is checked the first time the computation reads it at a prefix, and only
    then: a bad law at a later prefix is refused with its field even after other prefixes
    (and the other table) were checked, and reading the same law again reads no deadline."""
    from .deadlines import CountingDeadline

    def draft(prefix):
        return (F(1, 2), F(1, 2), F(0)) if prefix != (2,) else (F(1, 2), F(1, 2), F(1, 2))

    i = make_instance(3, ["1/3"] * 3, draft, policy="rheo", K=2, m=1, depth=2, budget=2)
    _ = i.one
    d = CountingDeadline()
    with i.bounded(d):
        i._checked_law(i.draft, ())
        first = d.checks
        i._checked_law(i.draft, ())
    assert first == 2 * 3 and d.checks == first
    i.node_laws((1,))
    with pytest.raises(CaseError) as err:
        i.node_laws((2,))
    assert err.value.field == 'draft["2"]' and "must sum to exactly 1" in err.value.message


def test_the_instance_checks_its_vocabulary_and_raw_logits_arithmetic():
    """The Python API builds an Instance directly, past the case-file reader: a vocab_size that
    is no integer >= 1 (0, a bool, a float) is refused naming "vocab_size", and raw target
    logits with exact arithmetic naming "target_logits", and neither a target table nor raw
    logits naming "target"."""
    from rheo.reference.instance import Instance, Table

    draft = Table("draft", {}, default=(F(1, 2), F(1, 2)))
    exact = make_instance(2, ["1/2"] * 2, ["1/2"] * 2, policy="rheo", K=2, m=1, depth=1, budget=2).config
    for bad in (0, True, 2.0):
        with pytest.raises(CaseError) as err:
            Instance(bad, Table("target", {}, default=(F(1, 2), F(1, 2))), draft, exact)
        assert err.value.field == "vocab_size" and f"got {bad!r}" in err.value.message
    logits = Table("target_logits", {}, default=(0.0, 0.0))
    with pytest.raises(CaseError) as err:
        Instance(2, None, draft, exact, target_logits=logits)
    assert err.value.field == "target_logits" and '"arithmetic": "float64"' in err.value.message
    with pytest.raises(CaseError) as err:
        Instance(2, None, draft, exact)
    assert (err.value.field, err.value.message) == ("target", "is required (or target_logits: raw logits)")


def test_check_law_names_the_entry_and_holds_the_float_tolerance():
    """A law of the wrong length names the table's field, a negative entry its index; in
    float64 a sum off 1 by more than 1e-9 (2^-27) is refused and one within it (2^-31) is
    taken, sums exact in binary; in exact
    arithmetic only exactly 1 is taken."""
    from rheo.reference.instance import check_law

    cases = [
        ((F(1),), True, 'draft["0"]', "must have vocab_size = 2 entries, got 1"),
        ((F(3, 2), F(-1, 2)), True, 'draft["0"][1]', "must be >= 0, got -1/2"),
        ((F(1, 2), F(1, 3)), True, 'draft["0"]', "must sum to exactly 1 in exact mode, sums to 5/6"),
        ((0.5, 0.5 + 2**-27), False, 'draft["0"]', "must sum to 1 (within 1e-9), sums to 1.0000000074505806"),
        ((0.5, 1.0), False, 'draft["0"]', "must sum to 1 (within 1e-9), sums to 1.5"),
    ]
    for law, exact, field, message in cases:
        with pytest.raises(CaseError) as err:
            check_law(law, 2, exact, 'draft["0"]')
        assert (err.value.field, err.value.message) == (field, message)
    check_law((0.5, 0.5 + 2**-31), 2, False, 'draft["0"]')
    check_law((F(1, 2), F(1, 2)), 2, True, 'draft["0"]')


def test_sampling_parameters_naming_a_token_past_the_vocabulary_are_refused():
    """Every token id the sampling parameters name must be < vocab_size: id 2 of a
    three-token vocabulary is taken, id 3 refused naming its field."""
    from rheo.reference.instance import Instance, Table
    from rheo.reference.params import Params
    from rheo.reference.sampling import SamplingParameters

    def instance(tok):
        sampling = SamplingParameters(logit_bias=((tok, 1.0),))
        config = Params(policy="rheo", K=2, m=1, depth=1, budget=2, arithmetic="float64", sampling=sampling)
        law = Table("target", {}, default=(0.5, 0.25, 0.25))
        return Instance(3, law, Table("draft", {}, default=(0.5, 0.25, 0.25)), config)

    assert instance(2).n == 3
    with pytest.raises(CaseError) as err:
        instance(3)
    assert (err.value.field, err.value.message) == ('logit_bias["3"]', "names token 3, but vocab_size is 3")
