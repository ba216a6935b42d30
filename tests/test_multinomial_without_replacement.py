"""``torch.multinomial(q, n, replacement=False)`` through concrete draws (docs/gate.md,
"Concrete draws"): its law is torch's, ordered draws without replacement (Plackett-Luce, each
pick w_j over the weight not drawn yet), exactly, in either spelling; a tree drafted with it
and verified on the host (``.numpy()``, where the symbolic tracer stops) is certified lossless
end to end, its witness replaying, and the with-replacement ratio planted in it is caught; a
draw with too many ordered tuples is refused with one line naming it and the fix; a row with
fewer tokens of weight than n gets what torch gives it (torch 2.13 returns zero-weight tokens
there; it does not raise)."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import pytest

torch = pytest.importorskip("torch")

from rheo.checks.exact.certify import certify_implementation  # noqa: E402
from rheo.checks.exact.concrete import concrete_law  # noqa: E402
from rheo.checks.exact.random_values import Unsupported  # noqa: E402
from rheo.checks.gate.coverage import supported_cases  # noqa: E402
from rheo.checks.protocol.load import load_implementation  # noqa: E402
from rheo.checks.witness import replay  # noqa: E402

from .plackett_luce import ordered_law, plackett_luce  # noqa: E402
from .test_without_replacement import SECOND_SIBLING  # noqa: E402

FILTERS = ("target_top_k", "target_top_p", "target_min_p", "draft_top_k")
Q = [0.4, 0.0, 0.2, 0.2, 0.2]  # a zero and a three-way tie


def _law(leaves) -> dict:
    out: dict = {}
    for p, o in leaves:
        out[o] = out.get(o, 0.0) + p
    return out


def _concrete(call) -> dict:
    return _law(concrete_law(call, None, 100_000, 24, 0)[0])


# ---- (a) the law of one draw ----


def test_multinomial_without_replacement_has_the_plackett_luce_law():
    """Both spellings (torch.multinomial and Tensor.multinomial arrive as one function): every
    ordered pair and triple of tokens with weight, each with its Plackett-Luce probability to
    1e-12. A law without the renormalisation (each pick w_j / sum(w)) gives P((0, 2)) = 0.08,
    not 2/15; one that ignored the order merges (0, 2) with (2, 0)."""
    q = torch.tensor(Q, dtype=torch.float64)
    pairs = _concrete(lambda: tuple(torch.multinomial(q, 2, replacement=False).tolist()))
    assert pairs.keys() == ordered_law(Q, 2).keys()
    assert pairs == pytest.approx(ordered_law(Q, 2), abs=1e-12)
    triples = _concrete(lambda: tuple(q.multinomial(3).tolist()))
    assert triples.keys() == ordered_law(Q, 3).keys()
    assert triples == pytest.approx(ordered_law(Q, 3), abs=1e-12)


def test_each_row_of_a_batched_draw_is_its_own_plackett_luce_draw():
    """probs [2, V] in float32: one block per row, the rows independent."""
    rows = torch.tensor([[0.5, 0.25, 0.25], [0.0, 0.75, 0.25]])
    law = _concrete(lambda: tuple(map(tuple, torch.multinomial(rows, 2).tolist())))
    want = {
        (a, b): pa * pb
        for a, pa in ordered_law(rows[0].double().tolist(), 2).items()
        for b, pb in ordered_law(rows[1].double().tolist(), 2).items()
    }
    assert law == pytest.approx(want, abs=1e-12)


# ---- (b) a whole implementation, end to end ----


def _tempered(logits, temperature: float) -> torch.Tensor:
    return torch.softmax(torch.as_tensor(logits, dtype=torch.float64) / temperature, dim=-1)


def _normalised(x: torch.Tensor, fallback: torch.Tensor) -> torch.Tensor:
    total = x.sum()
    return x / total if float(total) > 0 else fallback


class MultinomialChildren:
    """Lossless: the root's K = 2 children drawn by ``torch.multinomial(q, 2,
    replacement=False)``, verified by recursive rejection without replacement (Jeon et al.
    2024; examples/without_replacement.py ``RecursiveWithoutReplacement``): child i accepted
    while u_i q_i(x_i) <= r_i(x_i), q_i being q renormalised without the earlier sibling and
    r_i the residual norm(max(r - q_i, 0)) its rejection left. The coins are read on the
    host (``.numpy()``), where the symbolic tracer stops: concrete draws. A fixed schedule:
    the children, two coins, one last token (``torch.multinomial(., 1)``) on every run."""

    follows_uniforms = False

    def supports(self, config: dict) -> bool:
        plain = config["temperature"] > 0 and all(config.get(k) is None for k in FILTERS)
        return config["policy"] == "topk" and config["K"] == 2 and config["depth"] == 1 and plain

    def ratio_law(self, q: torch.Tensor, q_i: torch.Tensor) -> torch.Tensor:
        return q_i

    def cycle(self, draft_logits, target_logits, config: dict, temperature: float) -> list[int]:
        q = _tempered(draft_logits([()])[0], temperature)  # [V]
        r = _tempered(target_logits([()])[0], temperature)  # [V]
        kids = torch.multinomial(q, min(2, int((q > 0).sum())), replacement=False).tolist()
        laws, targets, q_i = [1.0, 1.0], [], q
        for i, x in enumerate(kids):  # what child i is verified against, given the earlier rejections
            law = self.ratio_law(q, q_i)
            laws[i] = float(law[x])
            targets.append(float(r[x]))
            r = _normalised(torch.clamp(r - law, min=0), r)
            rest = q_i.clone()
            rest[x] = 0.0
            q_i = _normalised(rest, q_i)
        coins = torch.rand(2, dtype=torch.float64).numpy()  # read on the host, as a kernel's output would be
        for i, x in enumerate(kids):
            if coins[i] * laws[i] <= targets[i]:
                bonus = _tempered(target_logits([(x,)])[0], temperature)
                return [x, int(torch.multinomial(bonus, 1).item())]
        return [int(torch.multinomial(r, 1).item())]


class WithReplacementRatio(MultinomialChildren):
    """Lossy: q itself, not q without the earlier sibling, in the ratio and the residual."""

    def ratio_law(self, q: torch.Tensor, q_i: torch.Tensor) -> torch.Tensor:
        return q


# On SECOND_SIBLING (from tests/test_without_replacement.py) the with-replacement ratio is lossy:
# the first token comes out (1/5, 5/12, 23/60), not p = (1/5, 9/20, 7/20) (``_first_token_law``,
# in fractions), so the worst sequence, (2, 1), is off by 1/30 * p(1 | 2) = 1/30 * 9/20 = 3/200.


def _impl(name: str):
    return load_implementation(f"tests.test_multinomial_without_replacement:{name}")


def _small_cases(impl) -> list[dict]:
    """The first 4 of the quick matrix's supported cases with V <= 4, zeros and ties among them."""
    cases = [c for c in supported_cases(impl, "exact", "quick").cases if c["vocab_size"] <= 4]
    return cases[:4]


def test_a_tree_drafted_by_multinomial_is_certified_lossless_through_concrete_draws():
    """Certified (never skipped, never unsupported) through concrete draws, and each
    certificate's witness (a categorical over ordered pairs) replays to the same law and
    verdict on its own."""
    impl = _impl("MultinomialChildren")
    cases = [*_small_cases(impl), SECOND_SIBLING]
    assert len(cases) == 5
    for case in cases:
        cert = certify_implementation(impl, case)
        assert cert.verdict == "lossless" and cert.draws == "concrete", cert.summary()
        saved = json.loads(json.dumps(cert.with_witness()))
        assert any(
            step["kind"] == "categorical" and step["draw"].startswith("torch.multinomial without replacement")
            for leaf in saved["witness"]["cycle"]
            for step in leaf["steps"]
        )
        assert replay(saved).agrees


def _first_token_law(with_replacement_ratio: bool) -> list[Fraction]:
    """The first token's law of ``MultinomialChildren`` (or the planted bug) on SECOND_SIBLING,
    every ordered pair of children weighted by Plackett-Luce, in exact fractions."""
    p = [Fraction(x) for x in SECOND_SIBLING["target"]["*"]]
    q = [Fraction(x) for x in SECOND_SIBLING["draft"]["*"]]

    def norm(x: list[Fraction], fallback: list[Fraction]) -> list[Fraction]:
        return [v / sum(x) for v in x] if sum(x) > 0 else fallback

    out = [Fraction(0)] * 3
    for pair in itertools.permutations(range(3), 2):
        left, r, q_i = plackett_luce(q, pair), p, q
        for x in pair:
            law = q if with_replacement_ratio else q_i
            accept = min(Fraction(1), r[x] / law[x])
            out[x] += left * accept
            left *= 1 - accept
            r = norm([max(a - b, Fraction(0)) for a, b in zip(r, law)], r)
            q_i = norm([0 if j == x else v for j, v in enumerate(q_i)], q_i)
        out = [o + left * rj for o, rj in zip(out, r)]
    return out


def test_the_with_replacement_ratio_is_caught_exactly():
    """The planted bug moves 1/30 of the first token's mass from token 1 to token 2 on the
    second-sibling case (3/200 on the worst sequence), and the certificate's law is the exact
    one of both designs: an enumeration that took the draw's law with replacement, or merged
    the two orders of a pair, would not give it."""
    for name, bug in (("MultinomialChildren", False), ("WithReplacementRatio", True)):
        cert = certify_implementation(_impl(name), SECOND_SIBLING)
        first = [sum(pr for out, pr in cert.law.items() if out[0] == t) for t in range(3)]
        assert first == pytest.approx([float(x) for x in _first_token_law(bug)], abs=1e-12)
    assert cert.verdict == "not lossless" and cert.draws == "concrete", cert.summary()
    assert cert.deviation == pytest.approx(3 / 200, abs=1e-12)
    assert replay(json.loads(json.dumps(cert.with_witness()))).agrees


# ---- (c) the cap ----


def test_too_many_ordered_tuples_are_refused_naming_the_call_and_the_fix():
    """V = 72, n = 2: 5112 ordered pairs, past the 5040 enumerated (V = 71 is within)."""
    q = torch.full((72,), 1 / 72)
    with pytest.raises(Unsupported) as info:
        concrete_law(lambda: tuple(torch.multinomial(q, 2).tolist()), None, 100_000, 24, 0)
    message = str(info.value)
    assert "torch.multinomial without replacement of n = 2 from V = 72" in message
    assert "test_multinomial_without_replacement.py:" in message  # the call's file:line
    assert "5112 ordered draws per row, more than the 5040" in message
    assert "Gumbel-top-k race over torch.rand keys" in message and "V <= 71 for n = 2" in message


# ---- (d) rows torch treats specially ----


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_row_with_fewer_tokens_of_weight_than_n_gets_what_torch_gives(dtype):
    """torch 2.13 draws without replacement as topk(w / E, n): with m < n tokens of weight it
    returns them in Plackett-Luce order and then tokens of weight 0, in the order its topk
    leaves their tie (it does not raise). The stand-in gives the same tuples (every tuple torch
    itself returns over 200 seeded draws, and only those) with the law of the first m."""
    w = [0.0, 0.5, 0.0, 0.3, 0.0, 0.2]
    probs = torch.tensor(w, dtype=dtype)
    law = _concrete(lambda: tuple(torch.multinomial(probs, 5).tolist()))
    g = torch.Generator().manual_seed(0)
    seen = {tuple(torch.multinomial(probs, 5, generator=g).tolist()) for _ in range(200)}
    assert law.keys() == seen
    assert {o[:3]: p for o, p in law.items()} == pytest.approx(ordered_law(probs.double().tolist(), 3), abs=1e-12)


@pytest.mark.parametrize(
    "n, rows",
    [(2, [[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]]), (4, [0.5, 0.5, 0.0])],
    ids=["a_row_without_weight", "more_samples_than_tokens"],
)
def test_rows_torch_refuses_are_refused_the_same_way(n, rows):
    """A row without weight, and more samples than tokens, raise RuntimeError, as in torch."""
    probs = torch.tensor(rows)
    with pytest.raises(RuntimeError):
        torch.multinomial(probs, n)  # torch itself
    with pytest.raises(RuntimeError):
        concrete_law(lambda: tuple(torch.multinomial(probs, n).flatten().tolist()), None, 1000, 24, 0)
