"""Exact certification of one case (``certify_implementation``): the law of the
implementation's tree builder (its handed uniforms bisected, or its own draws enumerated by
``rheo.checks.exact.tracer``), then of its verifier on each tree, or of whole ``cycle``
calls; the output law continued to length D+1 against p_T (``rheo.reference.certify``).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from rheo.checks.exact.budget import Outgrown, size
from rheo.checks.exact.certificate import ESCAPES, MAX_RUNS, PROBES, WITNESS_FORMAT, Certificate
from rheo.checks.exact.handed import CallCounter, handed_law, probe_handed
from rheo.checks.exact.precision import Precision
from rheo.checks.exact.random_values import ScheduleChanged
from rheo.checks.exact.tracer import (
    METHODS,
    RunCap,
    Trace,
    Unsupported,
    _Branch,
    enumerate_runs,
    intercepted,
    probe_runs,
)
from rheo.checks.protocol.calls import call_build_tree, call_cycle, call_cycle_rows, call_verify
from rheo.checks.protocol.inputs import (
    KIND_NAMES,
    law_instance,
    protocol_config,
    protocol_uniforms,
    reference_tree,
    target_logits,
)
from rheo.checks.protocol.judged import judged_instance
from rheo.checks.protocol.load import Implementation
from rheo.checks.protocol.outputs import BadOutput, read_result, verify_nodes
from rheo.checks.protocol.watch import watched
from rheo.reference import Uniforms, enumerate_choices
from rheo.reference.certify import cycle_law as reference_cycle_law
from rheo.reference.certify import max_deviation
from rheo.reference.deadline import Deadline
from rheo.reference.instance import Instance
from rheo.reference.tree import LabelledTree
from rheo.reference.tree import build_tree as reference_build_tree
from rheo.reference.verify import verification_law


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
        order = t["draw_order"][i] if "draw_order" in t else -1
        rows.append((t["slot_paths"][i], t["paths"][i], t["kinds"][i], probs, order))
    return tuple(sorted(rows))


def _choices(leaf: Any) -> list[dict]:
    """A traced leaf's witness: each choice with two or more options, its weights and option."""
    return [{"kind": "choice", "weights": list(w), "option": i, "what": fp} for w, i, fp in leaf.steps]


def _intervals(cells: list[tuple[float, float]]) -> list[dict]:
    """A handed-uniform leaf's witness: the cell of every uniform that was split."""
    return [{"kind": "interval", "cell": [lo, hi]} for lo, hi in cells if (lo, hi) != (0.0, 1.0)]


def _given(prob: float, by: str) -> list[dict]:
    return [{"kind": "given", "probability": float(prob), "by": by}]


class _OwnDraws(Exception):
    pass


def _no_draws(impl: Implementation, call: Callable[[], Any], roots: list[str]) -> Any:
    """Run ``call`` (an implementation that follows the handed uniforms): a draw of its own
    would make its law random given the uniforms, which this path cannot follow."""
    trace = Trace()
    with intercepted(trace, roots, (impl.obj,)):
        try:
            out = call()
        except _Branch:  # a draw of its own compared with something: the same finding
            _drew_nothing(trace)
            raise
    _drew_nothing(trace)
    return out


def _drew_nothing(trace: Trace) -> None:
    if trace.draws:
        raise Unsupported(
            f"it declares that it follows the handed uniforms but drew its own randomness ({trace.origins[0]}); "
            "set follows_uniforms = False"
        )


@contextmanager
def _handed(impl: Implementation, roots: list[str], method: str) -> Iterator[Callable[[Callable[[], Any]], Any]]:
    """``call -> its answer``, for every call of one handed-uniform enumeration and its probes,
    each checked to draw nothing of its own (``_no_draws``); method "fast" patches the random
    functions once around them all, with one trace restarted for each call."""
    if method != "fast":
        yield lambda call: _no_draws(impl, call, roots)
        return
    trace = Trace()

    def guarded(call: Callable[[], Any]) -> Any:
        trace.restart(())
        try:
            out = call()
        except _Branch:
            _drew_nothing(trace)
            raise
        _drew_nothing(trace)
        return out

    with intercepted(trace, roots, (impl.obj,)):
        yield guarded


def _tree_law(
    impl: Implementation, inst: Instance, roots: list[str], counter: CallCounter, rng, method: str,
    followed: list[str],
) -> tuple[dict, Precision]:  # fmt: skip
    """{tree key: (probability, tree dict)} and the lowest precision compared."""
    trees: dict[tuple, list] = {}
    bits = Precision()

    def add(prob: float, t: dict, backend: float | None = None, steps: list | None = None) -> None:
        key = _tree_key(t)
        if key not in trees:
            trees[key] = [0.0, t, 0.0, []]
        trees[key][0] += prob
        trees[key][2] += prob if backend is None else backend
        trees[key][3].append(steps or [])

    if not impl.builds_trees:
        for prob, tree in enumerate_choices(lambda ch: reference_build_tree(inst, ch), 1.0):
            add(float(prob), reference_tree(inst, tree), steps=_given(float(prob), "rheo.reference's tree builder"))
        return trees, bits
    E = 1 + inst.config.B * (inst.config.depth - 1)
    if impl.follows_uniforms:
        built: dict[tuple, dict] = {}

        with _handed(impl, roots, method) as guarded:

            def fn(values: np.ndarray) -> tuple:
                t = guarded(lambda: call_build_tree(impl, inst, _draw_uniforms(inst, values)))
                key = _tree_key(t)
                built[key] = t
                return key

            cells: list = []
            leaves, structure = handed_law(fn, E, counter, cells)
            probe_handed(fn, E, structure, rng, "build_tree")
        for (prob, key), c in zip(leaves, cells):
            add(prob, built[key], steps=_intervals(c))
        return trees, bits
    fixed = _draw_uniforms(inst, np.full(E, 0.5))
    runs_before = counter.runs
    try:
        return _symbolic_tree_law(impl, inst, roots, counter, rng, method, fixed, E, add, trees, bits)
    except Unsupported as e:
        symbolic = str(e)
    counter.runs = runs_before
    trees.clear()
    leaves, bits, shown = _concrete(symbolic, lambda: call_build_tree(impl, inst, fixed), None, counter, rng)
    for (prob, t), w in zip(leaves, shown):
        add(prob, t, steps=w["steps"])
    followed.append("concrete")
    return trees, bits


def _symbolic_tree_law(
    impl: Implementation, inst: Instance, roots: list[str], counter: CallCounter, rng, method: str,
    fixed: Uniforms, E: int, add: Callable[..., None], trees: dict, bits: Precision,
) -> tuple[dict, Precision]:  # fmt: skip
    seen: dict[tuple, tuple] = {}
    runs = [0]
    for leaf in enumerate_runs(
        lambda: call_build_tree(impl, inst, fixed), roots, counter.cap - counter.runs, runs, (impl.obj,), method
    ):
        add(leaf.prob, leaf.result, leaf.prob_backend, _choices(leaf))
        seen[leaf.script] = _tree_key(leaf.result)
        bits = bits.lower(leaf.precision)
    counter.runs += runs[0]
    for script, t in probe_runs(
        lambda: call_build_tree(impl, inst, _draw_uniforms(inst, rng.random(E))),
        roots,
        int(rng.integers(2**31)),
        PROBES,
        (impl.obj,),
        method,
    ):
        if seen.get(script) != _tree_key(t):
            raise Unsupported(
                "build_tree: a replay with random answers and scrambled seeds gave another tree: it uses "
                f"randomness this check does not intercept ({ESCAPES})"
            )
    return trees, bits


def _fresh(x: Any) -> Any:
    """A copy of a JSON-like value (the config dict): dicts and lists copied all the way down."""
    if isinstance(x, dict):
        return {k: _fresh(v) if isinstance(v, (dict, list, np.ndarray)) else v for k, v in x.items()}
    if isinstance(x, list):
        return [_fresh(v) for v in x]
    return x.copy() if isinstance(x, np.ndarray) else x


def _verifier(impl: Implementation, inst: Instance, tree: dict) -> Callable[[Uniforms], tuple]:
    """``uniforms -> call_verify(impl, inst, tree, uniforms)`` for every call of one
    enumeration (method "fast"): the target logits and the config made once, each call
    given its own copies (the tree's columns are shared, as there)."""
    nodes = verify_nodes(tree)
    logits, config, temperature = (
        target_logits(inst, tree["paths"]),
        protocol_config(inst),
        inst.config.temperature.value,
    )

    def call(uniforms: Uniforms) -> tuple:
        args = (dict(nodes), logits.copy(), _fresh(config), temperature, protocol_uniforms(uniforms))
        return read_result(watched("verify", inst, impl.obj.verify, *args), tree, inst.n)

    return call


def _walk_law(
    impl: Implementation,
    inst: Instance,
    tree: dict,
    roots: list[str],
    counter: CallCounter,
    rng,
    probes: int,
    method: str,
    followed: list[str],
) -> tuple[dict, dict, Precision, list[dict]]:
    """{output tokens: probability} of the verifier on ``tree``, the same with every drawn
    uniform on its generator's grid (the backend law), the lowest precision compared, and
    the witness (each leaf's steps and output)."""
    law: dict[tuple, float] = defaultdict(float)
    if not impl.verifies:
        labelled = LabelledTree(
            (s, p[-1], KIND_NAMES[k]) for s, p, k in zip(tree["slot_paths"], tree["paths"], tree["kinds"])
        )
        shown = []
        for o, pr in verification_law(inst, labelled).items():
            law[o] += float(pr)
            shown.append({"steps": _given(float(pr), "rheo.reference's verifier"), "output": list(o)})
        return law, law, Precision(), shown
    c = inst.config
    n = (c.depth + 1) * (c.K + 2)
    if impl.follows_uniforms:
        verifier = _verifier(impl, inst, tree) if method == "fast" else None
        with _handed(impl, roots, method) as guarded:

            def fn(values: np.ndarray) -> tuple:
                u = _walk_uniforms(inst, values)
                out = guarded(lambda: verifier(u) if verifier is not None else call_verify(impl, inst, tree, u))
                return out[0], tuple(out[1])

            cells: list = []
            leaves, structure = handed_law(fn, n, counter, cells)
            probe_handed(fn, n, structure, rng, "verify")
        for prob, (tokens, _) in leaves:
            law[tokens] += prob
        return (
            law,
            law,
            Precision(),
            [{"steps": _intervals(c), "output": list(t)} for (_, (t, _)), c in zip(leaves, cells)],
        )
    fixed = _walk_uniforms(inst, np.full(n, 0.5))
    runs_before = counter.runs
    try:
        return _symbolic_walk_law(impl, inst, tree, roots, counter, rng, probes, method, fixed, n)
    except Unsupported as e:
        symbolic = str(e)
    counter.runs = runs_before
    leaves, bits, shown = _concrete(symbolic, lambda: call_verify(impl, inst, tree, fixed), None, counter, rng)
    for prob, result in leaves:
        law[result[0]] += prob
    followed.append("concrete")
    return law, law, bits, [{"steps": w["steps"], "output": list(r[0])} for w, (_, r) in zip(shown, leaves)]


def _symbolic_walk_law(
    impl: Implementation, inst: Instance, tree: dict, roots: list[str], counter: CallCounter, rng, probes: int,
    method: str, fixed: Uniforms, n: int,
) -> tuple[dict, dict, Precision, list[dict]]:  # fmt: skip
    law: dict[tuple, float] = defaultdict(float)
    backend: dict[tuple, float] = defaultdict(float)
    seen: dict[tuple, tuple] = {}
    runs = [0]
    bits = Precision()
    shown = []
    verify = _verifier(impl, inst, tree) if method == "fast" else lambda u: call_verify(impl, inst, tree, u)
    for leaf in enumerate_runs(lambda: verify(fixed), roots, counter.cap - counter.runs, runs, (impl.obj,), method):
        shown.append({"steps": _choices(leaf), "output": list(leaf.result[0])})
        law[leaf.result[0]] += leaf.prob
        backend[leaf.result[0]] += leaf.prob_backend
        seen[leaf.script] = leaf.result
        bits = bits.lower(leaf.precision)
    counter.runs += runs[0]
    for script, out in probe_runs(
        lambda: call_verify(impl, inst, tree, _walk_uniforms(inst, rng.random(n))),
        roots,
        int(rng.integers(2**31)),
        probes,
        (impl.obj,),
        method,
    ):
        if seen.get(script) != out:
            raise Unsupported(
                "verify: a replay with random answers and scrambled seeds gave another output: it uses randomness "
                f"this check does not intercept ({ESCAPES})"
            )
    return law, backend, bits, shown


def _cycle_law(
    impl: Implementation,
    inst: Instance,
    roots: list[str],
    counter: CallCounter,
    rng,
    method: str,
    call: Callable[[], Any] | None = None,
    what: str = "cycle",
) -> tuple[dict, dict, Precision, str, list[dict]]:
    """{output tokens: probability} of the implementation's whole cycles (``cycle``; or of
    ``call``, another call of it, named ``what``: a mixed batch's ``cycle_batch``,
    ``rheo.checks.exact.mixed``), the backend law beside it, the lowest precision compared,
    how the draws were followed ("symbolic", or "concrete" where the symbolic tracer could
    not follow them: a kernel, an in-place operation, ``.item()``;
    ``rheo.checks.exact.concrete``), and the witness."""
    runs_before = counter.runs
    one = call or (lambda: call_cycle(impl, inst))
    try:
        law, backend, bits, shown = _symbolic_cycle_law(impl, one, roots, counter, rng, method, what)
        return law, backend, bits, "symbolic", shown
    except Unsupported as e:
        symbolic = str(e)
    counter.runs = runs_before
    rows = None
    if call is None and callable(getattr(impl.obj, "cycle_batch", None)):  # copies of this one request

        def rows(n: int) -> list[tuple]:
            return call_cycle_rows(impl, inst, n)

    leaves, bits, shown = _concrete(symbolic, one, rows, counter, rng)
    found: dict[tuple, float] = defaultdict(float)
    for prob, out in leaves:
        found[out] += prob
    return found, found, bits, "concrete", shown


def _concrete(
    symbolic: str, call: Callable[[], Any], rows: Callable[[int], list] | None, counter: CallCounter, rng
) -> tuple[list[tuple[float, Any]], Precision, list[dict]]:
    """The leaves (probability, result) of ``call`` with its torch draws given concrete values
    (``rheo.checks.exact.concrete``), after the symbolic tracer stopped with ``symbolic``, and
    their witness (each leaf's cells and output): the refusal names both when this cannot
    follow them either."""
    if "torch" not in sys.modules:
        raise Unsupported(symbolic)
    from rheo.checks.exact.concrete import concrete_law  # needs torch

    shown: list[dict] = []
    try:
        leaves, runs, bits = concrete_law(
            call, rows, counter.cap - counter.runs, PROBES, int(rng.integers(2**31)), witness=shown
        )
    except Unsupported as e:
        raise type(e)(f"{e} (the symbolic tracer stopped first: {symbolic})") from None  # ScheduleChanged stays one
    counter.runs += runs
    origin = "its draws, followed through concrete values, on their generator's grid" if bits < 53 else ""
    return leaves, Precision(bits, origin), shown


def _symbolic_cycle_law(
    impl: Implementation, call: Callable[[], Any], roots: list[str], counter: CallCounter, rng, method: str, what: str
) -> tuple[dict, dict, Precision, list[dict]]:
    law: dict[tuple, float] = defaultdict(float)
    backend: dict[tuple, float] = defaultdict(float)
    seen: dict[tuple, tuple] = {}
    runs = [0]
    bits = Precision()
    shown = []
    cap = counter.cap - counter.runs
    for leaf in enumerate_runs(call, roots, cap, runs, (impl.obj,), method):
        shown.append({"steps": _choices(leaf), "output": list(leaf.result)})
        law[leaf.result] += leaf.prob
        backend[leaf.result] += leaf.prob_backend
        seen[leaf.script] = leaf.result
        bits = bits.lower(leaf.precision)
    counter.runs += runs[0]
    seed = int(rng.integers(2**31))
    for script, out in probe_runs(call, roots, seed, PROBES, (impl.obj,), method):
        if seen.get(script) != out:
            raise Unsupported(
                f"{what}: a replay with random answers and scrambled seeds gave another output: it uses randomness "
                f"this check does not intercept ({ESCAPES})"
            )
    return law, backend, bits, shown


def whole_law_tolerance(
    cert: Certificate, impl: Implementation, law: dict, found: Precision, t0: float
) -> float | None:
    """The certificate's float tolerance, set on ``cert`` with where it came from: by the
    lowest precision that met a random value in the run (``found``; rheo.checks.exact.precision),
    or the implementation's ``exact_tolerance`` where it sets one (an override), when the
    enumerated ``law`` sums to 1 within it; None, with the certificate saying so
    ("unsupported": some randomness was not followed), when it does not."""
    declared = getattr(impl.obj, "exact_tolerance", None)
    cert.precision = found
    if declared is not None:
        tol = float(declared)
        cert.tolerance_from = f"exact_tolerance = {tol:g} on the implementation (the gate found {found.source()})"
    else:
        tol = found.tolerance
        cert.tolerance_from = found.source()
    cert.tolerance = tol
    total = sum(law.values())
    if math.isfinite(total) and abs(total - 1) <= tol:
        return tol
    cert.verdict = "unsupported"
    cert.detail = f"the enumerated law sums to {total:.12g}, not 1: some randomness was not followed"
    cert.seconds = time.perf_counter() - t0
    return None


def certify_implementation(
    impl: Implementation, case: dict, max_runs: int = MAX_RUNS, seed: int = 0, method: str = "fast"
) -> Certificate:
    """The implementation's exact output law on ``case`` and its deviation from the target
    (docs/spec.md §5). ``method``: "fast" (the default) or "replay", the first way of
    visiting the runs, kept to compare with (``tracer.enumerate_runs``; same law)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    t0 = time.perf_counter()
    inst = law_instance(case)  # float64 tables; exact cases keep their exact target laws, rounded once
    cert = Certificate(case, "skipped")
    if not impl.supports(protocol_config(inst)):
        cert.detail = "the implementation does not support this configuration"
        return cert
    roots = _roots(impl)
    counter = CallCounter(max_runs)
    rng = np.random.default_rng(seed)
    try:
        followed: list[str] = []
        trees, bits = (
            ({}, Precision()) if impl.runs_cycles else _tree_law(impl, inst, roots, counter, rng, method, followed)
        )
        law: dict[tuple, float] = defaultdict(float)
        law_backend: dict[tuple, float] = defaultdict(float)
        witness: dict[str, Any] = {"format": WITNESS_FORMAT, "judged": "sampler_law" if impl.has_sampler_law else "p_T"}
        if impl.runs_cycles:
            law, law_backend, bits, how, witness["cycle"] = _cycle_law(impl, inst, roots, counter, rng, method)
            cert.draws = how
        probes = max(2, PROBES // max(1, len(trees)))
        if not impl.runs_cycles:
            witness["trees"] = []
        for w_tree, tree, w_backend, tree_steps in trees.values():
            walk, walk_backend, b, walk_shown = _walk_law(
                impl, inst, tree, roots, counter, rng, probes, method, followed
            )
            witness["trees"].append({"leaves": tree_steps, "walk": walk_shown})
            bits = bits.lower(b)
            for o, pr in walk.items():
                law[o] += w_tree * pr
            for o, pr in walk_backend.items():
                law_backend[o] += w_backend * pr
    except NotImplementedError as e:
        cert.detail = f"the implementation raised NotImplementedError ({e})"
        return cert
    except (RunCap, Outgrown) as e:
        grown = e if isinstance(e, Outgrown) else Outgrown(counter.runs, time.perf_counter() - t0, None, e.args[0])
        own = not impl.follows_uniforms and (impl.builds_trees or impl.runs_cycles)
        what = size(case)[1] if own else f"V={case['vocab_size']}, K={case['K']}, depth {case['depth']}"
        cert.verdict, cert.detail = "outgrown", f"{grown.why()}: {what}"
        cert.runs, cert.seconds = max(counter.runs, grown.runs), time.perf_counter() - t0
        return cert
    except Unsupported as e:
        cert.verdict, cert.detail = "unsupported", str(e)
        cert.schedule_changed = isinstance(e, ScheduleChanged)
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
    if followed:
        cert.draws = "concrete"
    tol = whole_law_tolerance(cert, impl, law, bits, t0)
    if tol is None:
        return cert
    judged = judged_instance(impl, inst)
    dev = max_deviation(judged, dict(law))
    cert.deviation, cert.sequence = float(dev.value), list(dev.sequence)
    cert.continued, cert.target = float(dev.continued), float(dev.target)
    cert.law = dict(law)
    cert.witness = witness
    cert.backend_deviation = float(max_deviation(judged, dict(law_backend)).value)
    cert.verdict = "lossless" if cert.deviation <= tol else "not lossless"
    cert.tokens_per_cycle, cert.acceptance_rate = acceptance(law, inst.config.depth)
    cert.seconds = time.perf_counter() - t0
    return cert


def acceptance(law: dict, depth: int) -> tuple[float, float | None]:
    """(E|O|: tokens per cycle, E[accepted drafts] / depth: the acceptance rate) of an output
    law (every output is its accepted drafts and one final token)."""
    tau = float(sum(len(o) * p for o, p in law.items()) / max(sum(law.values()), 1e-300))
    return tau, (tau - 1) / depth if depth > 0 else None


REFERENCE_SECONDS = 10.0  # the reference's own cycle law on a case, at most (else no figure)


def reference_tokens(case: dict) -> float | None:
    """The reference's tokens per cycle on ``case`` (its own tree builder and verifier on the
    same draft and target laws: RheoSampling, or the Top-K policy the case names), exactly;
    None where its enumeration takes more than ``REFERENCE_SECONDS``."""
    try:
        inst, deadline = law_instance(case), Deadline(REFERENCE_SECONDS)
        with inst.bounded(deadline):
            law = reference_cycle_law(inst, deadline=deadline, count_draws=False)
        return float(law.tau())
    except Exception:  # past its time, or a case the reference does not take: no figure, never a finding
        return None
