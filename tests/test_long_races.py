"""Races over a whole vocabulary (docs/gate.md, "Races over a whole vocabulary"): past
``GROUP_FROM`` tokens, concrete certification finds the tokens of a race that can win by group
tests in two races whose outputs differ, instead of one token at a time. The tests show it
reads the same law as the token-by-token reading, finds a light token hidden behind a heavy
one of the same output, and refuses a race the output does not read rather than spend a run
per token on it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rheo.checks.cases.vocab import vocab_case  # noqa: E402
from rheo.checks.exact import concrete_race  # noqa: E402
from rheo.checks.exact.certify import certify_implementation  # noqa: E402
from rheo.checks.exact.concrete import concrete_law  # noqa: E402
from rheo.checks.exact.concrete_mode import RaceRow, race_row  # noqa: E402
from rheo.checks.exact.random_values import Unsupported  # noqa: E402
from rheo.checks.protocol.load import load_implementation  # noqa: E402

V = 2_050  # two tiles of 1,024 and a partial one: past GROUP_FROM, quick to run


def _law(leaves):
    out: dict = {}
    for p, o in leaves:
        out[o] = out.get(o, 0.0) + p
    return out


def test_a_row_of_runs_is_its_values():
    values = [1.0] * 300
    values[7] = 1e-30
    row = race_row(values)
    assert isinstance(row, RaceRow) and len(row.runs) == 3
    assert list(row) == values and row == race_row(values) and hash(row) == hash(race_row(values))
    assert race_row([0.5, 2.0]) == (0.5, 2.0)  # short rows stay tuples (every earlier point the same key)


def _sparse(n: int, mass: dict[int, str]) -> list[str]:
    law = ["0"] * n
    for token, share in mass.items():
        law[token] = share
    return law


def test_group_tests_read_the_law_token_by_token_reads(monkeypatch):
    """The tile-edge pattern of ``rheo.checks.cases.vocab`` at 300 tokens (tiles of 100), both ways."""
    impl = load_implementation("examples.kernel_chain:KernelChain")
    case = {
        **vocab_case(V, "tile edges"),
        "name": "300 tokens, tile edges",
        "vocab_size": 300,
        "target": {"*": _sparse(300, {99: "1/4", 100: "1/4", 200: "1/4", 299: "1/4"})},
        "draft": {"*": _sparse(300, {99: "1/2", 7: "1/4", 299: "1/4"})},
    }
    grouped = certify_implementation(impl, case)
    monkeypatch.setattr(concrete_race, "GROUP_FROM", 10**9)
    alone = certify_implementation(impl, case)
    assert grouped.verdict == alone.verdict == "lossless", (grouped.detail, alone.detail)
    assert grouped.deviation == alone.deviation
    assert grouped.runs * 4 < alone.runs  # a few runs per token of weight and halving, not per token


def test_a_light_token_behind_a_heavy_one_of_the_same_output_is_found():
    """The output tells token 1,024 apart from every other: a group holding it and the heavier
    1,023 (whose win gives the leader's output) changes nothing in the leader's race, but
    does in the second one, against token 2,000."""
    w = torch.zeros(V)
    w[1023], w[1024], w[2000] = 0.6, 0.1, 0.3

    def call():
        E = torch.empty(V).exponential_()
        j = int(w.clone().div_(E).argmax())
        return "light" if j == 1024 else "far" if j == 2000 else "leader"

    law = _law(concrete_law(call, None, 20_000, 24, 0)[0])
    assert law == pytest.approx({"leader": 0.6, "light": 0.1, "far": 0.3}, abs=1e-6)


def test_a_race_the_output_never_reads_is_refused_not_scanned():
    """A recovered token drawn on every run but read only when the draft is rejected: with
    the draft's ratio 1 it never is, so no second output exists to test groups against."""
    p = torch.zeros(V)
    p[5], p[V - 1] = 0.5, 0.5

    def call():
        u = float(torch.rand(1, dtype=torch.float64))
        E = torch.empty(V).exponential_()
        recovered = int(p.clone().div_(E).argmax())
        return 5 if u <= 1.0 else recovered  # the draft token 5, p / q = 1: always accepted

    with pytest.raises(Unsupported, match=r"a row of 2,050\): no token's win changes the output"):
        concrete_law(call, None, 20_000, 24, 0)
