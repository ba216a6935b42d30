"""Races drawn for a batch of rows in one call (docs/gate.md, "Races over uniforms"): a level of
a tree whose keys come from one ``torch.rand(rows, V)``, then ``topk``/``argmax`` per row, is
read as one race per row, each with its Plackett-Luce law, once the rows are separated; and
the corpus's engine-style batched sampled tree (examples/without_replacement.py,
``BatchedSampledTree``) is certified exactly in float32 with no ``exact_tolerance``, its two
planted bugs caught exactly. What each test would catch:

- the per-row law: a reading that took a batch of rows as one race over all its elements
  (or refused it, as before) gives the wrong law or a SKIP;
- rows that share their uniforms are no independent races: refused, never certified;
- the lossless tree on quick cases and its bugs' deviations >= 1e-3 with witnesses that
  replay: a certifier that stopped seeing the float32 or the rows would fail one of them.
"""

from __future__ import annotations

import itertools
import json

import pytest

torch = pytest.importorskip("torch")

import examples.without_replacement as corpus  # noqa: E402
from rheo.checks.exact.certify import certify_implementation  # noqa: E402
from rheo.checks.exact.check import check_exact  # noqa: E402
from rheo.checks.exact.random_values import Unsupported  # noqa: E402
from rheo.checks.exact.tracer import enumerate_runs  # noqa: E402
from rheo.checks.gate.coverage import supported_cases  # noqa: E402
from rheo.checks.protocol.load import load_implementation  # noqa: E402
from rheo.checks.witness import replay  # noqa: E402

from .plackett_luce import ordered_law  # noqa: E402

Q = torch.tensor([[0.5, 0.3, 0.2, 0.0], [0.1, 0.1, 0.4, 0.4], [0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)


def law(fn) -> dict:
    out: dict = {}
    for leaf in enumerate_runs(fn, [], 100_000, [0]):
        out[leaf.result] = out.get(leaf.result, 0.0) + leaf.prob
    return out


@pytest.mark.parametrize(
    "keys",
    [
        lambda q, u: q.log() - (-u.log()).log(),  # Gumbel keys
        lambda q, u: q / (-u.log()),  # an exponential race
        lambda q, u: u ** (1 / q),  # u^(1/w): weighted reservoir sampling's keys
    ],
    ids=["gumbel", "w_over_E", "u_pow_1_over_w"],
)
def test_a_batch_of_rows_drawn_in_one_call_is_one_race_per_row(keys):
    """topk over [3, V] keys from one torch.rand(3, V): the law of the three rows' orders is
    the product of each row's Plackett-Luce law (zeros never drawn; a row with one token of
    weight draws it)."""

    def fn():
        u = torch.rand(3, 4, dtype=torch.float64)
        top = torch.topk(keys(Q, u), 2, dim=-1).indices
        return tuple(tuple(int(t) for t in row[: int((Q[r] > 0).sum().clamp(max=2))]) for r, row in enumerate(top))

    got = law(fn)
    rows = [ordered_law(Q[r].tolist(), 2) for r in range(3)]
    want = {tuple(o): rows[0][o[0]] * rows[1][o[1]] * rows[2][o[2]] for o in itertools.product(*rows)}
    assert got.keys() == want.keys()
    for o, p in want.items():
        assert got[o] == pytest.approx(p, abs=1e-12)


def test_an_argmax_per_row_is_a_categorical_per_row_in_float32():
    q32 = Q.float()

    def fn():
        u = torch.rand(3, 4)  # float32 uniforms, float32 keys
        return tuple(torch.argmax(q32.log() - (-u.log()).log(), dim=1).tolist())

    got = law(fn)
    for (a, b, c), p in got.items():
        assert p == pytest.approx(float(Q[0, a] * Q[1, b] * Q[2, c]), abs=1e-6)
    leaves = list(enumerate_runs(fn, [], 10_000, [0]))
    assert min(leaf.bits for leaf in leaves) == 24  # the race's float32 keys set the tolerance


def test_a_batch_row_with_no_weight_draws_nothing_and_keepdim_keeps_the_shape():
    """A padded row (every token of probability 0: keys -inf) draws nothing: its argmax is
    what torch gives (token 0), the other row's law is untouched; argmax without a dim and
    keepdim=True has torch's shape [1, 1]."""
    q = torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)

    def fn():
        u = torch.rand(2, 3, dtype=torch.float64)
        keys = q.log() - (-u.log()).log()
        other = torch.rand(1, 3, dtype=torch.float64)
        whole = torch.argmax(q[:1].log() - (-other.log()).log(), keepdim=True)
        return tuple(torch.argmax(keys, dim=1).tolist()), tuple(whole.shape)

    assert law(fn) == pytest.approx({((0, 0), (1, 1)): 0.25, ((1, 0), (1, 1)): 0.75}, abs=1e-12)


def test_rows_that_share_their_uniforms_are_refused():
    """One row of keys expanded over three rows: three races over the same uniforms, whose
    joint law is no product of their own; refused, naming the draw."""

    def fn():
        u = torch.rand(1, 4, dtype=torch.float64).expand(3, 4)
        return tuple(torch.argmax(Q.log() - (-u.log()).log(), dim=1).tolist())

    with pytest.raises(Unsupported, match="share a random value"):
        law(fn)


def test_in_place_arithmetic_on_a_random_tensor_is_refused():
    """``u.mul_(2)`` changed u's values while the tracer kept its map (its name read as mul):
    P(u < 0.5) came out 0.5, not 0.25. Refused now (concrete draws follow it)."""

    def fn():
        u = torch.rand(1, dtype=torch.float64)
        u.mul_(2)
        return bool(u[0] < 0.5)

    with pytest.raises(Unsupported, match="in-place torch mul_"):
        law(fn)


# ---- the corpus's batched sampled tree ----


def _impl(name: str):
    return load_implementation(f"examples.without_replacement:{name}")


def test_the_batched_tree_is_lossless_exactly_in_float32_on_small_quick_cases():
    impl = _impl("BatchedSampledTree")
    assert not hasattr(impl.obj, "exact_tolerance")
    cases = supported_cases(impl, "exact", "quick").cases
    picked = [c for c in cases if c["depth"] == 2][:2] + [c for c in cases if c["depth"] == 1][:2]
    assert {c["depth"] for c in picked} == {1, 2}
    for case in picked:
        cert = certify_implementation(impl, case)
        assert cert.verdict == "lossless" and cert.draws == "symbolic", cert.summary()
        assert cert.tolerance == 1e-6 and cert.tolerance_from.startswith("float32"), cert.summary()


@pytest.mark.extended
def test_the_batched_tree_is_lossless_exactly_on_every_quick_case():
    impl = _impl("BatchedSampledTree")
    cases = supported_cases(impl, "exact", "quick").cases
    out = check_exact(impl, cases)
    assert out.verdict == "pass" and out.data["certified"] == len(cases), out.detail
    assert "up to float32 rounding" in out.detail


@pytest.mark.parametrize("bug", ["FirstRowKeys", "ResidualOfLastSibling"])
def test_each_planted_bug_of_the_batched_tree_is_caught_exactly(bug):
    impl = _impl(bug)
    cases = [c for c in supported_cases(impl, "exact", "quick").cases if c["depth"] == 2][:4]
    out = check_exact(impl, cases)
    assert out.verdict == "fail" and out.detail.startswith("not lossless (exact)"), out.detail
    saved = out.counterexample
    assert saved["max_abs_deviation"] >= 1e-3, saved["max_abs_deviation"]
    assert replay(json.loads(json.dumps(saved))).agrees


class KeysReadOnTheHost(corpus.BatchedSampledTree):
    """The batched tree with each row's children ordered on the host from ``keys.tolist()``:
    the symbolic tracer stops there (two random values compared), concrete draws follow it."""

    def children_order(self, keys, K):
        rows = keys.tolist()
        return torch.tensor([sorted(range(len(r)), key=lambda j: -r[j])[:K] for r in rows])


def test_concrete_draws_measure_a_race_where_a_rejected_first_child_hides_the_swap():
    """K = 3, V = 3, depth 1, T = 1/3: at the coins' default values the first child is rejected
    and the same token accepted whether the heaviest draft or a light one comes first, so the
    race's cuts measured there were the wrong pair's: the heaviest token (q = 0.8) got weight 0
    and this lossless design was "not lossless (exact)", deviation 0.0667. Measured in the
    context that tells every token's win apart (the coins at 0), it is lossless."""
    impl = load_implementation(f"{__name__}:KeysReadOnTheHost")
    case = next(
        c for c in supported_cases(impl, "exact", "quick").cases if c["name"] == "topk K=3 V=3 D=1 B=3 R=3 T=1/3 ties"
    )
    cert = certify_implementation(impl, case)
    assert cert.draws == "concrete" and cert.verdict == "lossless", cert.summary()


def test_a_coarse_concrete_split_made_finer_gives_the_symbolic_law(monkeypatch):
    """K = 3, V = 3, depth 1: the race's order prefix read at one point (the first child
    accepted) is one place; where a rejected first child makes the second count, the product
    check makes the split finer and builds the tree again. The law through concrete draws then
    equals the one the symbolic tracer enumerates on the same design, within the float32
    tolerance both find (the concrete race's weights are measured on float32 keys, the symbolic
    one's fitted in float64); without the finer split the case is refused ("no product")."""
    from rheo.checks.exact.concrete import ConcreteLaw

    host = load_implementation(f"{__name__}:KeysReadOnTheHost")
    case = next(
        c for c in supported_cases(host, "exact", "quick").cases if c["name"] == "topk K=3 V=3 D=1 B=3 R=2 T=1 ties"
    )
    concrete = certify_implementation(host, case)
    symbolic = certify_implementation(_impl("BatchedSampledTree"), case)
    assert concrete.draws == "concrete" and symbolic.draws == "symbolic"
    assert concrete.verdict == symbolic.verdict == "lossless", (concrete.summary(), symbolic.summary())
    assert concrete.law.keys() == symbolic.law.keys()
    for o, p in symbolic.law.items():
        assert concrete.law[o] == pytest.approx(p, abs=1e-6), o
    monkeypatch.setattr(ConcreteLaw, "_refine", lambda self, node: False)
    refused = certify_implementation(host, case)
    assert refused.verdict == "unsupported" and "no product" in refused.detail, refused.summary()
