"""rheo.checks.exact.tracer: every random call the gate intercepts, every pattern it follows, and
the uses it refuses, each on a function whose exact law is known."""

from __future__ import annotations

import bisect
import random
import sys
from collections import defaultdict

import numpy as np
import pytest

from rheo.checks.exact.tracer import Unsupported, enumerate_runs, probe_runs

torch = pytest.importorskip("torch")

P = [0.2, 0.5, 0.3]


def law(fn, roots=()) -> dict:
    out: dict = defaultdict(float)
    for leaf in enumerate_runs(fn, list(roots), 10**5, [0]):
        out[leaf.result] += leaf.prob
    return dict(out)


def assert_law(got: dict, want: dict, tol: float = 1e-12) -> None:
    assert set(got) <= set(want), got
    for k, v in want.items():
        assert got.get(k, 0.0) == pytest.approx(v, abs=tol), (k, got)


def first_above(cdf, u) -> int:
    return next(i for i, c in enumerate(cdf) if c > u)


@pytest.mark.parametrize(
    "draw",
    [
        lambda: random.random(),
        lambda: random.Random(7).random(),
        lambda: random.uniform(0.0, 1.0),
        lambda: np.random.default_rng().random(),  # unseeded: an escape unless intercepted
        lambda: np.random.default_rng(3).random(),
        lambda: np.random.random(),
        lambda: np.random.RandomState(1).random_sample(),
        lambda: torch.rand(1).item(),
        lambda: torch.rand(1, generator=torch.Generator().manual_seed(0)).item(),  # seeded inside: still random
        lambda: torch.empty(1).uniform_().item(),
    ],
    ids=[
        "random.random",
        "random.Random",
        "random.uniform",
        "numpy default_rng()",
        "numpy default_rng(seed)",
        "numpy legacy",
        "numpy RandomState",
        "torch.rand",
        "torch Generator",
        "Tensor.uniform_",
    ],
)
def test_every_uniform_source_gives_the_exact_coin_law(draw):
    assert_law(law(lambda: draw() < 0.3), {True: 0.3, False: 0.7})
    assert_law(law(lambda: first_above(np.cumsum(P), draw())), dict(enumerate(P)))


def test_tensor_coins_are_split_elementwise_and_reflected_comparisons_are_followed():
    ratio = torch.tensor([0.25, 0.5, 1.0], dtype=torch.float64)
    got = law(lambda: tuple((torch.rand_like(ratio) <= ratio).tolist()))
    assert_law(got, {(a, b, True): (0.25 if a else 0.75) * (0.5 if b else 0.5) for a in (0, 1) for b in (0, 1)})
    p = torch.tensor(P, dtype=torch.float64)
    assert_law(law(lambda: bool(p[1] >= random.random())), {True: 0.5, False: 0.5})
    assert_law(law(lambda: bool(1 - random.random() > 0.75)), {True: 0.25, False: 0.75})


def test_inverse_cdf_patterns():
    p = torch.tensor(P, dtype=torch.float64)
    cdf = torch.cumsum(p, 0)
    want = dict(enumerate(P))
    assert_law(law(lambda: int(torch.searchsorted(cdf, torch.rand(1)))), want)
    assert_law(law(lambda: int((cdf > torch.rand(1)).nonzero()[0])), want)
    assert_law(law(lambda: int(np.searchsorted(cdf.numpy(), random.random(), side="right"))), want)
    assert_law(law(lambda: bisect.bisect(cdf.tolist(), random.random())), want)


def test_categorical_draws_and_races():
    p = torch.tensor(P, dtype=torch.float64)
    want = dict(enumerate(P))
    assert_law(law(lambda: int(torch.multinomial(p, 1))), want)
    assert_law(law(lambda: int(np.random.default_rng().choice(3, p=P))), want)
    assert_law(law(lambda: random.choices(range(3), weights=P)[0]), want)
    assert_law(law(lambda: int(torch.argmax(p / torch.empty(3, dtype=torch.float64).exponential_()))), want)
    gumbel = lambda: -torch.log(-torch.log(torch.rand(3, dtype=torch.float64)))
    assert_law(law(lambda: int(torch.argmax(torch.log(p) + gumbel()))), want)
    assert_law(law(lambda: int(torch.bernoulli(torch.tensor([0.25])).item())), {1: 0.25, 0: 0.75})
    # two samples without replacement: the second is drawn from the renormalized rest
    got = law(lambda: tuple(torch.multinomial(p, 2).tolist()))
    assert got[(1, 0)] == pytest.approx(0.5 * 0.2 / 0.5)


def test_float32_rounding_is_the_implementations_own():
    """EAGLE's `r <= p` with a Python coin and a float32 p: the coin is rounded to float32."""
    p = torch.tensor([0.1], dtype=torch.float32)
    got = law(lambda: bool(random.random() <= p[0]))
    assert got[True] == pytest.approx(0.1, abs=1e-8)
    assert got[True] != pytest.approx(0.1, abs=1e-12)  # float32(0.1) plus the rounding of the coin


@pytest.mark.parametrize(
    "fn, needle",
    [
        (lambda: float(random.random()) < 0.5, "float() of a random value"),
        (lambda: random.random() < random.random(), "two random values compared"),
        (lambda: torch.randn(2), "torch.randn"),
        (lambda: random.randint(0, 3), "random.randint"),
        (lambda: np.random.default_rng().normal(), "numpy random normal"),
        (lambda: bool(torch.rand(3).sum() > 1), "torch sum on a random tensor"),
        (lambda: int(torch.argmax(torch.rand(3) * torch.tensor([1.0, 2.0, 3.0]))), "neither an exponential race"),
    ],
    ids=["float", "two uniforms", "randn", "randint", "numpy normal", "sum", "argmax"],
)
def test_uses_it_cannot_follow_are_refused_in_one_line_with_the_call_site(fn, needle):
    with pytest.raises(Unsupported) as err:
        law(fn)
    msg = str(err.value)
    assert needle in msg and "\n" not in msg
    assert "test_tracer.py:" in msg  # the line of the code that did it


def test_module_level_aliases_are_patched(tmp_path, monkeypatch):
    (tmp_path / "aliased_rng.py").write_text("from random import random\n\ndef coin():\n    return random() < 0.25\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import aliased_rng

    try:
        assert_law(law(aliased_rng.coin, roots=["aliased_rng"]), {True: 0.25, False: 0.75})
    finally:
        sys.modules.pop("aliased_rng", None)


def test_a_nondeterministic_choice_order_is_caught():
    calls = iter(range(100))

    def fn():
        if next(calls) % 2:  # the second run compares another variable first
            return (torch.rand(1) < 0.5).item(), (torch.rand(1) < 0.5).item()
        return (random.random() < 0.5,)

    with pytest.raises(Unsupported, match="not deterministic"):
        law(fn)


def test_probes_see_randomness_that_escaped():
    sysrand = random.SystemRandom()  # not intercepted: its answers change from run to run

    def fn():
        return (random.random() < 0.5, sysrand.random() < 0.5)

    known = {leaf.script: leaf.result for leaf in enumerate_runs(fn, [], 100, [0])}
    mismatches = sum(known.get(s) != out for s, out in probe_runs(fn, [], 0, 40))
    assert mismatches > 0
    fair = {leaf.script: leaf.result for leaf in enumerate_runs(lambda: random.random() < 0.5, [], 100, [0])}
    assert all(fair.get(s) == out for s, out in probe_runs(lambda: random.random() < 0.5, [], 0, 40))


def test_the_backend_law_puts_each_uniform_on_its_generators_grid():
    """`u <= 0` has probability 0 for a continuous u, but 2^-24 for a float32 torch.rand
    (k / 2^24, k = 0 included) and 2^-53 for Python's random (EAGLE's inclusive coin)."""
    for draw, grid in ((lambda: torch.rand(1), 2.0**-24), (lambda: random.random(), 2.0**-53)):
        ideal: dict = defaultdict(float)
        backend: dict = defaultdict(float)
        for leaf in enumerate_runs(lambda d=draw: bool(d() <= torch.tensor([0.0], dtype=torch.float64)), [], 100, [0]):
            ideal[leaf.result] += leaf.prob
            backend[leaf.result] += leaf.prob_backend
        assert ideal[True] < 1e-300
        assert backend[True] == grid and backend[False] == 1 - grid
    # away from the grid's edge the two agree to the grid's resolution
    leaves = list(enumerate_runs(lambda: bool(torch.rand(1) < 0.3), [], 100, [0]))
    assert all(abs(leaf.prob - leaf.prob_backend) < 2.0**-23 for leaf in leaves)


def test_numpy_ufuncs_on_random_values_are_followed():
    """np.log(u) and np.float32(p) >= u (the numpy side of a Python or numpy coin)."""
    third = {True: 0.3, False: 0.7}
    assert_law(law(lambda: bool(np.log(random.random()) < np.log(0.3))), third)
    assert_law(law(lambda: bool(np.log(np.random.default_rng().random(1))[0] < np.log(0.3))), third)
    assert_law(law(lambda: bool(1 - np.random.random() >= 0.7)), third)
    assert_law(
        law(lambda: tuple(bool(x) for x in np.array([0.2, 0.7]) > random.random())),
        {(True, True): 0.2, (False, True): 0.5, (False, False): 0.3},
    )
    with pytest.raises(Unsupported, match="numpy.sin of a random value"):
        law(lambda: np.sin(random.random()) < 0.5)


def test_generators_made_before_the_run_are_followed():
    class Holder:
        shared = random.Random(1)

        def __init__(self):
            self.rng = np.random.default_rng(0)
            self.py = random.Random()

        def coin(self):
            return (self.rng.random() < 0.25, self.py.random() < 0.5, self.shared.random() < 0.5)

    h = Holder()
    got: dict = defaultdict(float)
    for leaf in enumerate_runs(h.coin, [], 100, [0], objects=(h,)):
        got[leaf.result] += leaf.prob
    assert got[(True, True, True)] == pytest.approx(0.25 * 0.5 * 0.5)
    assert isinstance(h.rng, np.random.Generator) and isinstance(h.py, random.Random)  # restored


def test_helper_modules_beside_the_implementation_are_patched(tmp_path, monkeypatch):
    (tmp_path / "coin_helpers.py").write_text("from random import random\n\ndef coin():\n    return random() < 0.25\n")
    (tmp_path / "coin_engine.py").write_text("from coin_helpers import coin\n\ndef run():\n    return coin()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import coin_engine

    try:
        assert_law(law(coin_engine.run, roots=[str(tmp_path)]), {True: 0.25, False: 0.75})
    finally:
        sys.modules.pop("coin_engine", None)
        sys.modules.pop("coin_helpers", None)
