"""Races over uniforms and the product check (docs/gate.md, "Races over uniforms" and "The
product check"): a row of uniforms compared across the row, as an argmax or as a top-k order,
is read as an exponential race with its Plackett-Luce law, by the symbolic tracer and through
concrete draws; an enumeration whose cells are no product is refused, never certified."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rheo.checks.exact import concrete as concrete_module  # noqa: E402
from rheo.checks.exact.concrete import concrete_law  # noqa: E402
from rheo.checks.exact.random_values import Trace, Unsupported  # noqa: E402
from rheo.checks.exact.tracer import enumerate_runs  # noqa: E402

from .plackett_luce import ordered_law  # noqa: E402


def _law(leaves) -> dict:
    out: dict = {}
    for p, o in leaves:
        out[o] = out.get(o, 0.0) + p
    return out


Q_SKEWED = [0.98, 0.02, 0.0]  # a light token and a zero: the mass the old enumeration misplaced is small


def _gumbel_argmax_via_list():
    """Gumbel-max over a row of uniforms, its keys read back as Python floats (the symbolic
    tracer stops there: concrete draws)."""
    q = torch.tensor(Q_SKEWED, dtype=torch.float64)

    def call():
        u = torch.rand(3, dtype=torch.float64)
        keys = (q.log() - (-u.log()).log()).tolist()
        return max(range(3), key=lambda i: keys[i])

    return call


def test_old_enumeration_certifies_a_race_wrongly_and_the_probes_miss_it(monkeypatch):
    """Without the race reading and the product check (the enumeration before them), a
    Gumbel-max over uniforms is split one uniform at a time: token 1 gets 0.014 instead of
    0.02, and the 24 random probes miss it at every seed tried."""
    monkeypatch.setattr(concrete_module.ConcreteLaw, "_coupled", lambda *a: False)
    monkeypatch.setattr(concrete_module.ConcreteLaw, "check_product", lambda *a: None)
    for seed in range(3):
        law = _law(concrete_law(_gumbel_argmax_via_list(), None, 100_000, 24, seed)[0])
        assert law[1] == pytest.approx(0.014046, abs=1e-5)  # not 0.02: a wrong law, and no refusal


def test_gumbel_max_over_uniforms_is_a_race_through_concrete_draws():
    law = _law(concrete_law(_gumbel_argmax_via_list(), None, 100_000, 24, 0)[0])
    assert law == pytest.approx({0: 0.98, 1: 0.02}, abs=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_gumbel_top_k_order_gets_the_plackett_luce_law(dtype):
    q = torch.tensor([0.5, 0.3, 0.2, 0.0], dtype=torch.float64)

    def call():
        u = torch.rand(4, dtype=dtype)
        keys = (q.log() - (-u.double().log()).log()).tolist()
        return tuple(sorted(range(4), key=lambda i: -keys[i])[:2])

    law = _law(concrete_law(call, None, 100_000, 24, 0)[0])
    want = ordered_law(q.tolist(), 2)
    assert law.keys() == want.keys()
    for o, p in want.items():
        assert law[o] == pytest.approx(p, abs=1e-6 if dtype == torch.float32 else 1e-12)


@pytest.mark.parametrize(
    "keys",
    [
        lambda w, u: w / (-u.log()),  # an exponential race w / E
        lambda w, u: u ** (1 / w),  # weighted reservoir sampling's keys
        lambda w, u: w.log() - (-(1 - u).log()).log(),  # Gumbel keys from 1 - u
    ],
    ids=["w_over_E", "u_pow_1_over_w", "gumbel_of_1_minus_u"],
)
def test_every_race_form_is_read(keys):
    w = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)

    def call():
        u = torch.rand(3, dtype=torch.float64)
        k = keys(w, u).tolist()
        return tuple(sorted(range(3), key=lambda i: -k[i]))

    law = _law(concrete_law(call, None, 100_000, 24, 0)[0])
    want = ordered_law(w.tolist(), 2)
    assert {o[:2]: p for o, p in law.items()} == pytest.approx(want, abs=1e-12)


def test_exponential_row_in_order_gets_the_plackett_luce_law():
    p = torch.tensor([0.1, 0.6, 0.3])

    def call():
        E = torch.empty(3).exponential_()
        return tuple(p.clone().div_(E).argsort(descending=True)[:2].tolist())

    law = _law(concrete_law(call, None, 100_000, 24, 0)[0])
    want = ordered_law(p.double().tolist(), 2)
    assert law == pytest.approx(want, abs=1e-6)


def test_a_row_that_is_no_race_is_refused_naming_it():
    def call():
        u = torch.rand(2, dtype=torch.float64).tolist()
        return int(u[0] + 0.001 * (u[1] > 0.9) < 0.3)  # u_0's cut moves with u_1: coupled, but no race

    with pytest.raises(Unsupported, match=r"torch\.rand at .*test_races\.py:\d+ \(a row of 2 as a race\)"):
        concrete_law(call, None, 100_000, 24, 0)


def test_cells_that_are_no_product_are_refused_and_the_old_way_was_wrong(monkeypatch):
    """Two separate uniforms: u_0's cut moves by 0.001 where u_1 > 0.9. The probes miss it
    (a mass of 1e-4); the product check finds it at the end of u_0's cell and refuses, naming
    the draw; without the check the law is 0.3, not 0.3001."""

    def call():
        a = float(torch.rand((), dtype=torch.float64))
        b = float(torch.rand((), dtype=torch.float64))
        return int(a < 0.3 + 0.001 * (b > 0.9))

    with pytest.raises(Unsupported, match=r"torch\.rand at .*test_races\.py:\d+: .*no product"):
        concrete_law(call, None, 100_000, 24, 0)
    monkeypatch.setattr(concrete_module.ConcreteLaw, "check_product", lambda *a: None)
    law = _law(concrete_law(call, None, 100_000, 24, 0)[0])
    assert law[1] == pytest.approx(0.3, abs=1e-9)  # the true P is 0.3001


def test_symbolic_topk_over_gumbel_keys_is_plackett_luce():
    q = torch.tensor([0.5, 0.25, 0.25, 0.0], dtype=torch.float64)

    def call():
        u = torch.rand(4, dtype=torch.float64)
        keys = q.log() - (-u.log()).log()
        return tuple(torch.topk(keys, 3).indices.tolist())

    leaves = list(enumerate_runs(call, [], 10_000, [0]))
    law = _law((leaf.prob, leaf.result) for leaf in leaves)
    want = ordered_law(q.tolist(), 3)
    assert law == pytest.approx(want, abs=1e-15)


def test_symbolic_sort_keeps_zero_weight_tokens_last():
    q = torch.tensor([0.0, 0.7, 0.3], dtype=torch.float64)

    def call():
        u = torch.rand(3, dtype=torch.float64)
        return tuple(torch.argsort(q / (-u.log()), descending=True).tolist())

    law = _law((leaf.prob, leaf.result) for leaf in enumerate_runs(call, [], 10_000, [0]))
    assert law == pytest.approx({(1, 2, 0): 0.7, (2, 1, 0): 0.3}, abs=1e-15)


def test_symbolic_race_values_refuse_any_use():
    def call():
        u = torch.rand(3, dtype=torch.float64)
        top = torch.topk(-(-u.log()).log(), 2)
        return float(top.values.sum())

    with pytest.raises(Unsupported, match="values of a random top-k"):
        list(enumerate_runs(call, [], 10_000, [0]))


def test_symbolic_uniform_compared_after_its_race_is_refused():
    def call():
        u = torch.rand(3, dtype=torch.float64)
        j = int(torch.argmax(-(-u.log()).log()))  # Gumbel-max, equal weights
        return j, bool(u[0] < 0.5)

    with pytest.raises(Unsupported, match="compared after a race"):
        list(enumerate_runs(call, [], 10_000, [0]))


def test_trace_restart_forgets_the_raced_values():
    trace = Trace()
    trace.raced.add(3)
    trace.restart(())
    assert trace.raced == set()


def test_handed_uniforms_whose_cells_are_no_product_are_refused(monkeypatch):
    """The handed-uniform enumeration has the same check: u_1's cut moves by 0.001 where
    u_0 > 0.9, although u_0 alone never changes the output at u_1 = 1/2 (one cell); without
    the check the law is 0.3, not 0.3001."""
    from rheo.checks.exact import handed

    def fn(u):
        return int(u[1] < 0.3 + 0.001 * (u[0] > 0.9))

    with pytest.raises(Unsupported, match=r"cells of uniform 1 move where uniform 0 moves inside its cell \[0, 1\)"):
        handed.handed_law(fn, 2, handed.CallCounter(100_000))
    monkeypatch.setattr(handed, "_same_cells", lambda *a: None)
    law = _law(handed.handed_law(fn, 2, handed.CallCounter(100_000))[0])
    assert law[1] == pytest.approx(0.3, abs=1e-9)
