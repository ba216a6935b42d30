"""Exact certification through concrete draws (rheo.checks.exact.concrete): kernels, in-place
races, ``.item()`` and batched rows followed from the outside, and refused with one line where
they cannot be."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

from rheo.checks.exact.certify import certify_implementation  # noqa: E402
from rheo.checks.exact.concrete import concrete_law  # noqa: E402
from rheo.checks.exact.random_values import Unsupported  # noqa: E402
from rheo.checks.gate.coverage import supported_cases  # noqa: E402
from rheo.checks.protocol.load import load_implementation  # noqa: E402


def _law(leaves):
    out: dict = {}
    for p, o in leaves:
        out[o] = out.get(o, 0.0) + p
    return out


def _cases(name: str, n: int) -> tuple:
    impl = load_implementation(f"examples.kernel_chain:{name}")
    return impl, supported_cases(impl, "exact", "smoke").cases[:n]


def test_in_place_race_recovers_its_weights():
    p = torch.tensor([0.1, 0.0, 0.6, 0.3])

    def call():
        E = torch.empty(4).exponential_()
        return int(p.clone().div_(E).argmax())

    law = _law(concrete_law(call, None, 10_000, 24, 0)[0])
    assert set(law) == {0, 2, 3}  # the zero-weight token never wins
    for k, w in ((0, 0.1), (2, 0.6), (3, 0.3)):
        assert law[k] == pytest.approx(w, abs=1e-6)


def test_uniform_through_item_is_bisected_on_its_grid():
    def call():
        u = torch.rand(())  # float32: the grid k / 2^24
        return int(float(u.item()) < 0.3) + 2 * int(u.item() < 0.9)

    law = _law(concrete_law(call, None, 10_000, 24, 0)[0])
    assert law == pytest.approx({3: 0.3, 2: 0.6, 0: 0.1}, abs=2**-23)


def test_small_randint_is_enumerated():
    law = _law(concrete_law(lambda: int(torch.randint(0, 3, ()).item()), None, 1000, 24, 0)[0])
    assert law == pytest.approx({0: 1 / 3, 1: 1 / 3, 2: 1 / 3})


def test_not_a_step_function_is_refused_naming_the_draw():
    def call():
        u = float(torch.rand((), dtype=torch.float64))
        return int((u * 7) % 1 < 0.5)  # seven cells each way: not one interval per output

    with pytest.raises(Unsupported, match=r"torch\.rand at .*test_concrete\.py:\d+: a random probe"):
        concrete_law(call, None, 10_000, 64, 0)


def test_exponentials_used_as_a_sum_are_refused():
    def call():
        E = torch.empty(3).exponential_()
        return int(E.sum().item() < 2.0)

    with pytest.raises(Unsupported, match=r"Tensor\.exponential_ at .*test_concrete\.py:\d+"):
        concrete_law(call, None, 10_000, 64, 0)


def test_engine_style_chain_is_certified_lossless():
    impl, cases = _cases("KernelChain", 3)
    for case in cases:
        cert = certify_implementation(impl, case)
        assert cert.verdict == "lossless", cert.summary()
        assert cert.draws == "concrete"


def test_rows_give_the_same_law_in_fewer_calls():
    """An engine whose call costs more than a row (a kernel launch, here a 20 ms sleep): the
    points of a bisection's round go in one call."""
    impl, cases = _cases("KernelChain", 1)
    rows_impl, _ = _cases("KernelChainRows", 1)
    calls = {"one": 0, "rows": 0}
    one, many = impl.obj.cycles, rows_impl.obj.cycles

    def count_one(*a):
        calls["one"] += 1
        return one(*a)

    def count_rows(*a):
        calls["rows"] += 1
        time.sleep(0.02)
        return many(*a)

    impl.obj.cycles, rows_impl.obj.cycles = count_one, count_rows
    a = certify_implementation(impl, cases[0])
    b = certify_implementation(rows_impl, cases[0])
    assert a.verdict == b.verdict == "lossless"
    assert a.law.keys() == b.law.keys()
    for k in a.law:
        assert b.law[k] == pytest.approx(a.law[k], abs=1e-9)
    assert calls["rows"] * 2 < calls["one"], calls


def test_lossy_correction_is_found():
    impl, cases = _cases("ResidualFromTarget", 2)
    certs = [certify_implementation(impl, c) for c in cases]
    assert any(c.verdict == "not lossless" and c.deviation > 0.01 for c in certs), [c.summary() for c in certs]


def test_seeding_randint_is_refused_with_the_way_out():
    impl, cases = _cases("SeededFusedBonus", 1)
    cert = certify_implementation(impl, cases[0])
    assert cert.verdict == "unsupported"
    assert "torch.randint over 2147483648 values at examples/kernel_chain.py:" in cert.detail
    assert "native" in cert.detail
