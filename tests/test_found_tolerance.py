"""The tolerance exact certification finds itself (rheo.checks.exact.precision; docs/gate.md,
"The tolerance the gate finds"): the lowest precision that met a random value in the run,
carried through torch calls, promotions and Python floats read from tensors; where it came
from, in the verdict and the JSON. What each test would catch:

- a float32 variant of every lossless corpus design (its laws softmaxed in float32, its coins
  float64) must stay lossless with no ``exact_tolerance``: a gate that reads only the dtype
  of the final comparison (float64) fails it at 1e-9 (the false FAIL of the issue);
- every planted bug in float32 stays lossy: finding float32 must not hide a real loss;
- a float64 sampler whose only defect is 1e-6 must still be caught at 1e-9: a gate that
  widens the tolerance whenever it is unsure would pass it;
- the carrying itself, one rule at a time, on functions whose precision is known.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import examples.without_replacement as corpus  # noqa: E402
from rheo.checks.exact.certify import certify_implementation  # noqa: E402
from rheo.checks.exact.check import check_exact  # noqa: E402
from rheo.checks.exact.tracer import enumerate_runs  # noqa: E402
from rheo.checks.gate.coverage import supported_cases  # noqa: E402
from rheo.checks.protocol.load import Implementation, load_implementation  # noqa: E402
from rheo.checks.witness import replay  # noqa: E402

LOSSLESS = ["GumbelChain", "RecursiveWithoutReplacement", "IidDrafts", "BlockVerification", "SampledTree"]
BUGS = ["UntemperedKeys", "ResidualRejectedOnly", "WithReplacementRatio", "BlockResidualLastLaw"]
CASES = 3


def in_float32(name: str) -> Implementation:
    """The corpus design ``name`` with its laws in float32 (its coins stay float64)."""
    cls = type(f"{name}Float32", (getattr(corpus, name),), {"law_dtype": torch.float32, "__module__": __name__})
    globals()[cls.__name__] = cls  # loadable by name, as the gate's workers load it
    return load_implementation(f"{__name__}:{cls.__name__}")


def small(impl: Implementation, n: int = CASES) -> list[dict]:
    cases = supported_cases(impl, "exact", "quick").cases
    return [c for c in cases if c["vocab_size"] <= 4 and c["depth"] <= 2][:n]


@pytest.mark.parametrize("name", LOSSLESS)
def test_a_float32_variant_of_each_lossless_design_stays_lossless_with_the_float32_it_finds(name):
    """Each certificate says float32 (1e-6), where it came from (the softmax's line in the
    corpus) and where it met a random value; several cases are above float64's 1e-9, so the
    dtype of the last comparison alone (float64 coins) would have failed them."""
    impl = in_float32(name)
    assert not hasattr(impl.obj, "exact_tolerance")
    above_float64 = 0
    for case in small(impl):
        cert = certify_implementation(impl, case)
        assert cert.verdict == "lossless", cert.summary()
        assert cert.tolerance == 1e-6 and cert.precision.name == "float32", cert.summary()
        assert cert.tolerance_from.startswith("float32: ") and "without_replacement.py" in cert.tolerance_from
        assert "reaching" in cert.tolerance_from, cert.tolerance_from
        above_float64 += cert.deviation > 1e-9
        if cert.deviation > 1e-9:
            assert ", up to float32 rounding" in cert.summary()
        assert replay(json.loads(json.dumps(cert.with_witness()))).agrees
    if name in ("GumbelChain", "BlockVerification"):  # chains: float32 rounding shows above 1e-9
        assert above_float64, f"{name}: no case above 1e-9, the test shows nothing"


@pytest.mark.parametrize("name", BUGS)
def test_each_planted_bug_in_float32_stays_lossy(name):
    impl = in_float32(name)
    out = check_exact(impl, small(impl, 8))
    assert out.verdict == "fail" and out.detail.startswith("not lossless (exact)"), out.detail
    assert out.counterexample["max_abs_deviation"] > 1e-4  # a hundred times the float32 tolerance
    assert out.counterexample["tolerance_from"].startswith("float32")


def test_the_float64_designs_keep_float64s_tolerance():
    """float64 end to end: nothing lower met a random value, the tolerance stays 1e-9."""
    impl = load_implementation("examples.without_replacement:RecursiveWithoutReplacement")
    cert = certify_implementation(impl, small(impl, 1)[0])
    assert cert.verdict == "lossless" and cert.tolerance == 1e-9, cert.summary()
    assert cert.tolerance_from.startswith("float64"), cert.tolerance_from


class OffByAMillionth(corpus.GumbelChain):
    """A float64 chain verifier whose acceptance ratio is 1e-6 too high (min(1, p/q + 1e-6)):
    lossy by about 1e-6, in float64 arithmetic end to end."""

    def cycle(self, draft_logits, target_logits, config, temperature):
        L = int(min(config["depth"], config["budget"]))
        V = config["vocab_size"]
        keys_u = torch.rand(L, V, dtype=torch.float64)
        coins = torch.rand(L, dtype=torch.float64)
        last_u = torch.rand(V, dtype=torch.float64)
        drafts, qs, path = [], [], ()
        for i in range(L):
            qs.append(self.law(draft_logits([path])[0], temperature))
            drafts.append(corpus.gumbel_max(qs[-1], keys_u[i]))
            path = (*path, drafts[-1])
        ps = self.law(target_logits([tuple(drafts[:i]) for i in range(L + 1)]), temperature)
        out = []
        for i, x in enumerate(drafts):
            if bool(coins[i] <= ps[i][x] / qs[i][x] + 1e-6):
                out.append(x)
                continue
            residual = corpus._normalised(torch.clamp(ps[i] - qs[i], min=0), ps[i])
            return [*out, corpus.gumbel_max(residual, last_u)]
        return [*out, corpus.gumbel_max(ps[L], last_u)]


def test_a_deviation_of_a_millionth_in_float64_is_still_caught():
    """Finding the tolerance must not hide a small algorithmic bug: float64 end to end, the
    tolerance stays 1e-9 and the 1e-6 loss is a finding."""
    impl = load_implementation(f"{__name__}:OffByAMillionth")
    certs = [certify_implementation(impl, c) for c in small(impl, 4)]
    lossy = [c for c in certs if c.verdict == "not lossless"]
    assert lossy, [c.summary() for c in certs]
    assert all(c.tolerance == 1e-9 for c in certs)
    assert 1e-9 < max(c.deviation for c in lossy) < 1e-5, [c.summary() for c in lossy]


def test_exact_tolerance_stays_an_override_and_says_so():
    cls = type("DeclaresTolerance", (corpus.GumbelChain,), {"exact_tolerance": 1e-3, "__module__": __name__})
    globals()[cls.__name__] = cls
    impl = load_implementation(f"{__name__}:DeclaresTolerance")
    cert = certify_implementation(impl, small(impl, 1)[0])
    assert cert.tolerance == 1e-3 and cert.tolerance_from.startswith("exact_tolerance = 0.001 on the implementation")
    assert "the gate found float64" in cert.tolerance_from


# ---- the carrying, rule by rule ----


def lowest(fn) -> tuple[int, str]:
    leaves = list(enumerate_runs(fn, [], 10_000, [0]))
    worst = min(leaves, key=lambda leaf: leaf.bits)
    return worst.bits, worst.bits_from


def test_a_float32_softmax_promoted_before_the_coin_is_found_with_its_line():
    logits = torch.tensor([0.1, 0.7, -0.3], dtype=torch.float64)

    def fn():
        q = torch.softmax(logits.float(), -1).double()  # float32 rounding, then float64
        return bool(torch.rand((), dtype=torch.float64) <= q[1])

    bits, origin = lowest(fn)
    assert bits == 24 and "torch float in float32 at" in origin and "test_found_tolerance.py" in origin
    assert "reaching a threshold" in origin


def test_a_python_float_read_from_a_float32_tensor_keeps_its_precision():
    q = torch.tensor([0.2, 0.8], dtype=torch.float32)

    def fn():
        ratio = min(1.0, 0.5 / q[1].item())  # a Tainted float through arithmetic and min
        return random.random() < ratio

    assert lowest(fn)[0] == 24


def test_float_of_a_float32_tensor_counts_as_reaching_the_randomness():
    """float() must return a plain float: the value leaves what the gate follows, so its
    precision is counted where it is read."""
    q = torch.tensor([0.25], dtype=torch.float32)

    def fn():
        p = float(q[0])
        return random.random() < p

    bits, origin = lowest(fn)
    assert bits == 24 and "read out of torch" in origin


def test_float64_end_to_end_stays_float64():
    q = torch.tensor([0.2, 0.8], dtype=torch.float64)

    def fn():
        u = torch.rand(2, dtype=torch.float64)
        return tuple((u * q <= q.sqrt()).tolist()), random.random() < float(q[0])

    assert lowest(fn) == (53, "")


def test_a_float32_table_as_categorical_weights_is_found():
    w = torch.tensor([0.25, 0.75], dtype=torch.float32)
    bits, origin = lowest(lambda: int(torch.multinomial(w, 1)))
    assert bits == 24 and "the weights of a categorical draw" in origin


@pytest.mark.parametrize(
    "draw",
    [
        lambda w: int(np.random.choice(2, p=w.numpy())),
        lambda w: random.choices([0, 1], weights=w.tolist())[0],
        lambda w: int(torch.bernoulli(w)[1]),
        lambda w: int(torch.multinomial(torch.tensor([w.tolist()], dtype=torch.float64), 1)),
    ],
    ids=["numpy choice", "random.choices", "torch.bernoulli", "a nested list promoted"],
)
def test_float32_weights_of_every_categorical_draw_are_found(draw):
    """The weights reach the draw as a NumPy float32 array, Tainted floats, a float32 tensor,
    or floats read out of one and promoted inside nested lists: each is float32 rounding."""
    w = torch.tensor([0.25, 0.75], dtype=torch.float32)
    assert lowest(lambda: draw(w))[0] == 24
