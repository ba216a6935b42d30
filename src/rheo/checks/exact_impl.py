"""Exact certification of an implementation: its output law, computed by enumerating every
random choice it makes, against the target law (docs/spec.md §5; docs/gate.md, "Exact
certification").

One cycle of the implementation is its tree builder then its verifier (the reference fills
in a part it does not provide). Each part's randomness is enumerated:

- **Handed uniforms** (an implementation that follows docs/spec.md §7): its output is a
  step function of each uniform. The uniforms are resolved one at a time, in schedule
  order: the cells of one uniform (the intervals on which the output stays the same, later
  uniforms held fixed) are found by bisection, each weighted by its length.
- **Its own draws** (``follows_uniforms = False``): ``rheo.checks.tracer`` intercepts
  torch, NumPy and Python ``random`` and enumerates every answer.

Two laws come out: the *ideal* one (every drawn uniform continuous: the verdict) and the
*backend* one (every drawn uniform on its generator's grid, k / 2^24 for a float32
``torch.rand``, reported beside it: there an inclusive ``u <= 0`` accepts a token of
probability 0 with probability 2^-24).

The law of the output O, continued by exact target sampling to length D+1, is compared with
p_T on V^(D+1) (``rheo.reference.certify.max_deviation``), against the implementation's
own ``sampler_law`` when it has one. The implementation's float thresholds make the law a
float: the tolerance is 1e-9 when every random value was compared in float64, 1e-6 when a
float32 operand took part, 1e-2 for 16-bit floats (``exact_tolerance`` on the
implementation overrides it).

It never guesses: random leaves are replayed with every choice answered at random and the
global seeds of random, NumPy and torch scrambled (``PROBES`` per part), and handed-uniform
cells are checked at random points. Any disagreement, a law that does not sum to 1, or a use
of randomness the tracer cannot follow makes the certificate ``unsupported`` with a
one-line reason, and the gate relies on the statistical check instead.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from rheo.checks import parallel
from rheo.checks.corpus import shrunk_search
from rheo.checks.harness import (
    KIND_NAMES,
    BadOutput,
    Implementation,
    call_build_tree,
    call_cycle,
    call_verify,
    case_config,
    describe,
    implementation_of,
    judged_instance,
    law_instance,
    protocol_config,
    reference_tree,
    shipped,
)
from rheo.checks.outcome import Outcome
from rheo.checks.strategies import cases_from_configs, config_pool
from rheo.checks.tracer import RunCap, Trace, Unsupported, below, enumerate_runs, intercepted, probe_runs
from rheo.reference import Uniforms, enumerate_choices
from rheo.reference.certify import max_deviation
from rheo.reference.instance import Instance
from rheo.reference.params import Params
from rheo.reference.tree import LabelledTree
from rheo.reference.tree import build_tree as reference_build_tree
from rheo.reference.verify import verification_law

ESCAPES = (
    "os.urandom, secrets, random.SystemRandom, a generator of a library the check does not scan, or a C "
    "extension's own; the line cannot be named"
)
MAX_RUNS = 200_000  # executions of one part of the implementation per case
PROBES = 24  # random replays per part and case
TOLERANCE = {53: 1e-9, 24: 1e-6}
CUT_WIDTH = 2.0**-42  # bisection stops when a cut is known to this width


@dataclass
class Certificate:
    """What the exact check found on one case."""

    case: dict
    verdict: str  # "lossless" | "not lossless" | "unsupported" (not followed) | "crashed" | "skipped" (configuration)
    detail: str = ""
    deviation: float | None = None  # ideal law: every drawn uniform continuous
    backend_deviation: float | None = None  # every drawn uniform on its generator's grid (k / 2^24 for float32)
    sequence: list[int] = field(default_factory=list)
    continued: float | None = None
    target: float | None = None
    tolerance: float | None = None
    runs: int = 0
    trees: int = 0
    outputs: int = 0
    seconds: float = 0.0
    law: dict[tuple[int, ...], float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.case.get("name", f"V={self.case['vocab_size']} {self.case['policy']} K={self.case['K']}"))

    def summary(self) -> str:
        if self.verdict in ("lossless", "not lossless"):
            return (
                f"{self.name}: {self.verdict} (exact): deviation {self.deviation:.3g} (tolerance {self.tolerance:g}; "
                f"{self.backend_deviation:.3g} with the generators' grids), "
                f"{self.runs} runs, {self.trees} trees, {self.seconds:.2f} s"
            )
        return f"{self.name}: {self.verdict}: {self.detail}"

    def to_json(self) -> dict[str, Any]:
        return {
            "case_name": self.name,
            "verdict": self.verdict,
            "detail": self.detail,
            "max_abs_deviation": self.deviation,
            "backend_max_abs_deviation": self.backend_deviation,
            "worst_sequence": self.sequence,
            "worst_continued": self.continued,
            "worst_target": self.target,
            "tolerance": self.tolerance,
            "runs": self.runs,
            "trees": self.trees,
            "outputs": self.outputs,
            "seconds": round(self.seconds, 3),
        }


# ---- handed uniforms: step functions, one coordinate at a time ----


class _Counter:
    def __init__(self, cap: int) -> None:
        self.runs, self.cap = 0, cap

    def tick(self) -> None:
        self.runs += 1
        if self.runs > self.cap:
            raise RunCap(self.cap)


def _cells(h: Callable[[float], Any]) -> list[tuple[float, float, Any]]:
    """The intervals of [0, 1) on which h is constant, assuming each value of h occupies one
    interval (true of a coin u < a and of an inverse CDF); cuts found by bisection."""
    out: list[tuple[float, float, Any]] = []
    a = 0.0
    va = h(a)
    last = below(1.0)
    while True:
        if h(last) == va:
            out.append((a, 1.0, va))
            return out
        lo, hi = a, last
        while hi - lo > CUT_WIDTH:
            mid = lo + (hi - lo) / 2
            if h(mid) == va:
                lo = mid
            else:
                hi = mid
        out.append((a, hi, va))
        a, va = hi, h(hi)


def handed_law(fn: Callable[[np.ndarray], Any], n: int, counter: _Counter) -> tuple[list[tuple[float, Any]], Any]:
    """Leaves (probability, fn's result) of a function of n uniforms, and the tree of cells
    (for probing)."""

    memo: dict[tuple, Any] = {}

    def g(values: np.ndarray) -> Any:
        key = tuple(values.tolist())
        if key not in memo:
            counter.tick()
            memo[key] = fn(values)
        return memo[key]

    def rec(k: int, point: np.ndarray, prob: float, leaves: list) -> Any:
        def h(x: float) -> Any:
            p = point.copy()
            p[k] = x
            return g(p)

        node = []
        for lo, hi, value in _cells(h):
            if k == n - 1:
                leaves.append((prob * (hi - lo), value))
                node.append((lo, hi, value))
            else:
                p = point.copy()
                p[k] = lo + (hi - lo) / 2
                node.append((lo, hi, rec(k + 1, p, prob * (hi - lo), leaves)))
        return node

    leaves: list[tuple[float, Any]] = []
    if n == 0:
        return [(1.0, g(np.zeros(0)))], None
    structure = rec(0, np.full(n, 0.5), 1.0, leaves)
    return leaves, structure


def _locate(structure: Any, point: np.ndarray) -> Any:
    node, k = structure, 0
    while True:
        child = next(c for lo, hi, c in node if lo <= point[k] < hi)
        if k == len(point) - 1:
            return child
        node, k = child, k + 1


def _probe_handed(fn: Callable[[np.ndarray], Any], n: int, structure: Any, rng: np.random.Generator, what: str) -> None:
    if n == 0:
        return
    for _ in range(PROBES):
        point = rng.random(n)
        if fn(point) != _locate(structure, point):
            raise Unsupported(
                f"{what}: at uniforms {np.round(point, 6).tolist()} the output is not that of its cell: it is not a "
                "step function of each uniform that this check can follow"
            )


# ---- one case ----


def _roots(impl: Implementation) -> list[str]:
    """Where random functions bound to names of the implementation's own are patched: the
    top-level packages of its class and base classes, and the folders of their files (so a
    helper module beside a loose file is covered)."""
    mods = {c.__module__ for c in type(impl.obj).__mro__} | {getattr(impl.obj, "__module__", "") or ""}
    mods = {m for m in mods if m and m.split(".")[0] not in ("builtins", "numpy", "torch", "rheo")}
    out = {m.split(".")[0] for m in mods}
    for m in mods:
        path = getattr(sys.modules.get(m), "__file__", None)
        if path:
            out.add(os.path.dirname(os.path.abspath(path)))
    return sorted(out)


def _walk_uniforms(inst: Instance, values: np.ndarray) -> Uniforms:
    c = inst.config
    D, K = c.depth, c.K
    rows = values.reshape(D + 1, K + 2)
    return Uniforms(
        [0.5] * (1 + c.B * (D - 1)), rows[:, 0].tolist(), rows[:, 1 : K + 1].tolist(), rows[:, K + 1].tolist()
    )


def _draw_uniforms(inst: Instance, values: np.ndarray) -> Uniforms:
    c = inst.config
    D, K = c.depth, c.K
    return Uniforms(values.tolist(), [0.5] * (D + 1), [[0.5] * K for _ in range(D + 1)], [0.5] * (D + 1))


def _tree_key(t: dict) -> tuple:
    rows = []
    for i in range(len(t["tokens"])):
        probs = tuple(np.asarray(t["sample_probs"][i]).tolist()) if t["kinds"][i] == 1 else ()
        rows.append((t["slot_paths"][i], t["paths"][i], t["kinds"][i], probs))
    return tuple(sorted(rows))


class _OwnDraws(Exception):
    pass


def _no_draws(impl: Implementation, call: Callable[[], Any], roots: list[str]) -> Any:
    """Run ``call`` (an implementation that follows the handed uniforms): a draw of its own
    would make its law random given the uniforms, which this path cannot follow."""
    trace = Trace()
    with intercepted(trace, roots, (impl.obj,)):
        out = call()
    if trace.draws:
        raise Unsupported(
            f"it declares that it follows the handed uniforms but drew its own randomness ({trace.origins[0]}); "
            "set follows_uniforms = False"
        )
    return out


def _tree_law(impl: Implementation, inst: Instance, roots: list[str], counter: _Counter, rng) -> tuple[dict, int]:
    """{tree key: (probability, tree dict)} and the lowest precision compared."""
    trees: dict[tuple, list] = {}
    bits = 53

    def add(prob: float, t: dict, backend: float | None = None) -> None:
        key = _tree_key(t)
        if key not in trees:
            trees[key] = [0.0, t, 0.0]
        trees[key][0] += prob
        trees[key][2] += prob if backend is None else backend

    if not impl.builds_trees:
        for prob, tree in enumerate_choices(lambda ch: reference_build_tree(inst, ch), 1.0):
            add(float(prob), reference_tree(inst, tree))
        return trees, bits
    E = 1 + inst.config.B * (inst.config.depth - 1)
    if impl.follows_uniforms:
        built: dict[tuple, dict] = {}

        def fn(values: np.ndarray) -> tuple:
            t = _no_draws(impl, lambda: call_build_tree(impl, inst, _draw_uniforms(inst, values)), roots)
            key = _tree_key(t)
            built[key] = t
            return key

        leaves, structure = handed_law(fn, E, counter)
        for prob, key in leaves:
            add(prob, built[key])
        _probe_handed(fn, E, structure, rng, "build_tree")
        return trees, bits
    fixed = _draw_uniforms(inst, np.full(E, 0.5))
    seen: dict[tuple, tuple] = {}
    runs = [0]
    for leaf in enumerate_runs(
        lambda: call_build_tree(impl, inst, fixed), roots, counter.cap - counter.runs, runs, (impl.obj,)
    ):
        add(leaf.prob, leaf.result, leaf.prob_backend)
        seen[leaf.script] = _tree_key(leaf.result)
        bits = min(bits, leaf.bits)
    counter.runs += runs[0]
    for script, t in probe_runs(
        lambda: call_build_tree(impl, inst, _draw_uniforms(inst, rng.random(E))),
        roots,
        int(rng.integers(2**31)),
        PROBES,
        (impl.obj,),
    ):
        if seen.get(script) != _tree_key(t):
            raise Unsupported(
                "build_tree: a replay with random answers and scrambled seeds gave another tree: it uses "
                f"randomness this check does not intercept ({ESCAPES})"
            )
    return trees, bits


def _walk_law(
    impl: Implementation, inst: Instance, tree: dict, roots: list[str], counter: _Counter, rng, probes: int
) -> tuple[dict, dict, int]:
    """{output tokens: probability} of the verifier on ``tree``, the same with every drawn
    uniform on its generator's grid (the backend law), and the lowest precision compared."""
    law: dict[tuple, float] = defaultdict(float)
    backend: dict[tuple, float] = defaultdict(float)
    if not impl.verifies:
        labelled = LabelledTree(
            (s, p[-1], KIND_NAMES[k]) for s, p, k in zip(tree["slot_paths"], tree["paths"], tree["kinds"])
        )
        for o, pr in verification_law(inst, labelled).items():
            law[o] += float(pr)
        return law, law, 53
    c = inst.config
    n = (c.depth + 1) * (c.K + 2)
    if impl.follows_uniforms:

        def fn(values: np.ndarray) -> tuple:
            out = _no_draws(impl, lambda: call_verify(impl, inst, tree, _walk_uniforms(inst, values)), roots)
            return out[0], tuple(out[1])

        leaves, structure = handed_law(fn, n, counter)
        for prob, (tokens, _) in leaves:
            law[tokens] += prob
        _probe_handed(fn, n, structure, rng, "verify")
        return law, law, 53
    fixed = _walk_uniforms(inst, np.full(n, 0.5))
    seen: dict[tuple, tuple] = {}
    runs = [0]
    bits = 53
    for leaf in enumerate_runs(
        lambda: call_verify(impl, inst, tree, fixed), roots, counter.cap - counter.runs, runs, (impl.obj,)
    ):
        law[leaf.result[0]] += leaf.prob
        backend[leaf.result[0]] += leaf.prob_backend
        seen[leaf.script] = leaf.result
        bits = min(bits, leaf.bits)
    counter.runs += runs[0]
    for script, out in probe_runs(
        lambda: call_verify(impl, inst, tree, _walk_uniforms(inst, rng.random(n))),
        roots,
        int(rng.integers(2**31)),
        probes,
        (impl.obj,),
    ):
        if seen.get(script) != out:
            raise Unsupported(
                "verify: a replay with random answers and scrambled seeds gave another output: it uses randomness "
                f"this check does not intercept ({ESCAPES})"
            )
    return law, backend, bits


def _cycle_law(
    impl: Implementation, inst: Instance, roots: list[str], counter: _Counter, rng
) -> tuple[dict, dict, int]:
    """{output tokens: probability} of the implementation's whole cycles (``cycle``), the
    backend law beside it, and the lowest precision compared: every run of its intercepted
    draws, as for a verifier with its own randomness."""
    law: dict[tuple, float] = defaultdict(float)
    backend: dict[tuple, float] = defaultdict(float)
    seen: dict[tuple, tuple] = {}
    runs = [0]
    bits = 53
    for leaf in enumerate_runs(lambda: call_cycle(impl, inst), roots, counter.cap - counter.runs, runs, (impl.obj,)):
        law[leaf.result] += leaf.prob
        backend[leaf.result] += leaf.prob_backend
        seen[leaf.script] = leaf.result
        bits = min(bits, leaf.bits)
    counter.runs += runs[0]
    for script, out in probe_runs(lambda: call_cycle(impl, inst), roots, int(rng.integers(2**31)), PROBES, (impl.obj,)):
        if seen.get(script) != out:
            raise Unsupported(
                "cycle: a replay with random answers and scrambled seeds gave another output: it uses randomness "
                f"this check does not intercept ({ESCAPES})"
            )
    return law, backend, bits


def certify_implementation(impl: Implementation, case: dict, max_runs: int = MAX_RUNS, seed: int = 0) -> Certificate:
    """The implementation's exact output law on ``case`` and its deviation from the target
    (docs/spec.md §5)."""
    t0 = time.perf_counter()
    inst = law_instance(case)  # float64 tables; exact cases keep their exact target laws, rounded once
    cert = Certificate(case, "skipped")
    if not impl.supports(protocol_config(inst)):
        cert.detail = "the implementation does not support this configuration"
        return cert
    roots = _roots(impl)
    counter = _Counter(max_runs)
    rng = np.random.default_rng(seed)
    try:
        trees, bits = ({}, 53) if impl.runs_cycles else _tree_law(impl, inst, roots, counter, rng)
        law: dict[tuple, float] = defaultdict(float)
        law_backend: dict[tuple, float] = defaultdict(float)
        if impl.runs_cycles:
            law, law_backend, bits = _cycle_law(impl, inst, roots, counter, rng)
        probes = max(2, PROBES // max(1, len(trees)))
        for w_tree, tree, w_backend in trees.values():
            walk, walk_backend, b = _walk_law(impl, inst, tree, roots, counter, rng, probes)
            bits = min(bits, b)
            for o, pr in walk.items():
                law[o] += w_tree * pr
            for o, pr in walk_backend.items():
                law_backend[o] += w_backend * pr
    except NotImplementedError as e:
        cert.detail = f"the implementation raised NotImplementedError ({e})"
        return cert
    except RunCap as e:
        cert.verdict, cert.detail = "unsupported", f"more than {e.args[0]} runs were needed (the cap): not finished"
        cert.runs, cert.seconds = counter.runs, time.perf_counter() - t0
        return cert
    except Unsupported as e:
        cert.verdict, cert.detail = "unsupported", str(e)
        cert.runs, cert.seconds = counter.runs, time.perf_counter() - t0
        return cert
    except BadOutput as e:
        cert.verdict, cert.detail = "crashed", f"malformed output: {e}"
        return cert
    except Exception as e:  # the implementation crashed: a finding, with its message
        cert.verdict, cert.detail = "crashed", f"{type(e).__name__}: {e}"
        cert.runs, cert.seconds = counter.runs, time.perf_counter() - t0
        return cert
    cert.runs, cert.trees, cert.outputs = counter.runs, len(trees), len(law)
    tol = float(getattr(impl.obj, "exact_tolerance", TOLERANCE.get(bits, 1e-2 if bits < 24 else 1e-6)))
    cert.tolerance = tol
    total = sum(law.values())
    if not math.isfinite(total) or abs(total - 1) > tol:
        cert.verdict = "unsupported"
        cert.detail = f"the enumerated law sums to {total:.12g}, not 1: some randomness was not followed"
        cert.seconds = time.perf_counter() - t0
        return cert
    judged = judged_instance(impl, inst)
    dev = max_deviation(judged, dict(law))
    cert.deviation, cert.sequence = float(dev.value), list(dev.sequence)
    cert.continued, cert.target = float(dev.continued), float(dev.target)
    cert.law = dict(law)
    cert.backend_deviation = float(max_deviation(judged, dict(law_backend)).value)
    cert.verdict = "lossless" if cert.deviation <= tol else "not lossless"
    cert.seconds = time.perf_counter() - t0
    return cert


# ---- the gate's check ----


SEARCH_POOL = 600  # configurations drawn before the search; the small ones the implementation supports are searched


def search_strategy(impl: Implementation, seed: int = 0):
    """Small cases for the Hypothesis search, drawn only from configurations the
    implementation supports (V <= 4, K <= 3, depth <= 2; every policy, m, beam, budget,
    T in {0, 1/3, 1/2, 1}, sparse on/off, target filters; half with dyadic draft laws, so
    exact score ties are common), simplest first. None when it supports none of them."""
    small = [
        c
        for c in config_pool(seed, SEARCH_POOL)
        if c["vocab_size"] <= 4 and c["K"] <= 3 and c["depth"] <= 2 and impl.supports(case_config(c))
    ]
    if not small:
        return None
    return st.one_of(cases_from_configs(small), cases_from_configs(small, dyadic_draft=True))


def describe_case(case: dict) -> str:
    """The configuration of a case dict in one line: every key that is set (``harness.describe``)."""
    return describe(case["vocab_size"], Params.from_case({k: case[k] for k in Params.CASE_KEYS if k in case}))


def counterexample(impl: Implementation, cert: Certificate, shrunk: bool) -> dict[str, Any]:
    return {
        "check": "exact certification",
        "implementation": impl.name,
        "verdict": "not lossless (exact)",
        "shrunk": shrunk,
        **cert.to_json(),
        "case": cert.case,
        "output_law": {" ".join(map(str, o)): p for o, p in sorted(cert.law.items())},
        "replay": f"rheo gate --impl {impl.name} --replay FILE",
    }


def exact_case(ref: Implementation | str, case: dict, max_runs: int) -> Certificate:
    """One case of the exact-certification check (a piece of work: rheo.checks.parallel)."""
    return certify_implementation(implementation_of(ref), case, max_runs)


def check_exact(
    impl: Implementation,
    cases: list[dict],
    search_examples: int = 0,
    seed: int | None = 0,
    max_runs: int = MAX_RUNS,
    progress: Callable[[str], None] | None = None,
):
    """Certify the implementation exactly on ``cases``; then let Hypothesis search
    ``search_examples`` small cases for one it is not lossless on and shrink it."""
    if progress:
        progress(f"  exact: {len(cases)} cases ({parallel.current().description})")
    certs: list[Certificate] = parallel.current().map(exact_case, [(shipped(impl), case, max_runs) for case in cases])
    if progress:
        for i, cert in enumerate(certs, 1):
            if cert.verdict not in ("lossless", "skipped") or i % 10 == 0 or i == len(cases):
                progress(f"  exact {i}/{len(cases)}: {cert.summary()}")
    done = [c for c in certs if c.verdict in ("lossless", "not lossless")]
    bad = [c for c in certs if c.verdict == "not lossless"]
    refused = [c for c in certs if c.verdict == "unsupported"]
    data: dict[str, Any] = {
        "cases": [c.to_json() for c in certs if c.verdict != "skipped"],
        "certified": len(done),
        "unsupported_configurations": sum(c.verdict == "skipped" for c in certs),
        "runs": sum(c.runs for c in certs),
    }
    found = None
    if search_examples:

        def lossy(case: dict) -> bool:
            return certify_implementation(impl, case, max_runs).verdict == "not lossless"

        strategy = search_strategy(impl)
        if strategy is not None:
            found, seed = shrunk_search(strategy, lossy, search_examples, seed)
            data["search"] = {"examples": search_examples, "seed": seed, "found": found is not None}
    crashed = [c for c in certs if c.verdict == "crashed"]
    if crashed:
        first = crashed[0]
        return Outcome(
            "fail",
            f"the implementation failed on {first.name}: {first.detail}",
            {"check": "exact certification", "implementation": impl.name, **first.to_json(), "case": first.case},
            data,
        )
    if found is not None or bad:
        cert = certify_implementation(impl, found, max_runs) if found is not None else bad[0]
        where = "shrunk by Hypothesis" if found is not None else f"matrix case {cert.name}"
        line = (
            f"not lossless (exact): deviation {cert.deviation:.3g} > tolerance {cert.tolerance:g} at sequence "
            f"{cert.sequence} (continued {cert.continued:.6g}, target {cert.target:.6g}); {where}: "
            f"{describe_case(cert.case)}; {cert.runs} runs, {cert.seconds:.2f} s"
        )
        cert.detail = line
        return Outcome("fail", line, counterexample(impl, cert, found is not None), data)
    if refused:
        return Outcome(
            "skip",
            f"could not be followed exactly on {refused[0].name}: {refused[0].detail}; the output-law check decides",
            data=data,
        )
    if not done:
        return Outcome("fail", f"no case of the {len(cases)} was supported: nothing is proven", data=data)
    worst = max(done, key=lambda c: c.deviation or 0.0)
    searched = ""
    if "search" in data:
        searched = f"; a Hypothesis search of {search_examples} small cases (seed {seed}) found none lossy"
    names = ", ".join(c.name for c in done[:6]) + (", ..." if len(done) > 6 else "")
    return Outcome(
        "pass",
        f"lossless (exact) on {len(done)} cases ({names}): "
        f"largest deviation {worst.deviation:.2g} (tolerance {worst.tolerance:g}), {data['runs']} runs, "
        f"{sum(c.seconds for c in done):.1f} s{searched}",
        data=data,
    )


def replay_exact(impl: Implementation, saved: dict) -> Certificate:
    """Re-certify the case of a saved exact-certification counterexample."""
    return certify_implementation(impl, saved["case"])
