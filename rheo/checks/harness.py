"""Checking someone else's implementation: the ``rheo gate --impl`` protocol.

An implementation is any object (or a class constructible without arguments) with one or
both of these methods. Arrays are numpy (or anything ``numpy.asarray`` reads); ``V`` is
the vocabulary size, ``R`` the number of kept draft nodes, ``D`` the depth, ``K`` the slots.

``build_tree(draft_logits, config, temperature, u_draw) -> tree``   (docs/spec.md §1-§3)
    draft_logits: a function ``paths -> [len(paths), V]`` float64 array, the untruncated,
                  untempered draft logits (-inf = probability 0) at token paths from the
                  cycle root (the root is ``()``); call it with the nodes you expand
    config:       dict with the docs/spec.md §8 names: vocab_size, policy ("rheo" | "topk"), K, m,
                  depth, budget, beam, draft_top_k (None = no truncation), epsilon,
                  target_top_k, target_top_p, target_min_p (None = off)
    temperature:  float >= 0 (0 = greedy)
    u_draw:       [1 + beam (D-1)] uniforms, u_draw[e] for the e-th expansion (docs/spec.md §7)
    tree:         dict (or object with these attributes), one entry per kept node:
                  tokens [R], parents [R] (-1 = the root, else an index into these arrays),
                  kinds [R] (0 lead, 1 sample, 2 fill), slots [R] (0..K-1, the slot in the
                  parent's pool), sample_probs [R, V] (the residual law r the sample was
                  drawn from, on sample rows; ignored elsewhere). Node order is free.

``verify(tree, target_logits, config, temperature, uniforms) -> result``   (docs/spec.md §0, §4)
    tree:          as above (the harness passes the reference's tree, nodes in order-key order)
    target_logits: [R+1, V] untempered, unfiltered target logits; row 0 the root, row i+1
                   node i (apply temperature and the config's filters yourself)
    uniforms:      dict: u_sample [D+1], u_det [D+1, K], u_final [D+1] (docs/spec.md §7)
    result:        dict: tokens (emitted: accepted tokens then the bonus/correction token)
                   and accepted (the accepted node indices, root to leaf)

Optional: ``supports(config) -> bool`` (configurations it does not implement are skipped,
and counted); ``follows_uniforms = False`` (it draws its own randomness: only the
statistical check runs).

Checks (``check_decisions``, ``check_cycle_law``):
- decision equality: Hypothesis draws small exact cases and uniforms; the implementation's
  tree (every node's token path, kind, slot path, and the sample's residual law within
  1e-9) and its verifier's output and accepted path (on the reference's tree) must equal
  the reference's. Decisions within 1e-9 of a threshold are set aside and counted
  (``rheo.checks.differential``). A difference is shrunk to a minimal counterexample.
- cycle law: the implementation's empirical cycle law over many cycles against the exact
  law (Pearson chi-square, stated alpha and detectable TV; ``rheo.checks.goodness_of_fit``).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from rheo.casefile import load_case
from rheo.checks.corpus import shrunk_search
from rheo.checks.decisions import MARGIN, RequestCheck, reference_cycle
from rheo.checks.goodness_of_fit import gof
from rheo.checks.outcome import Outcome
from rheo.checks.strategies import cases
from rheo.reference import UniformChooser, Uniforms, cycle_law, walk
from rheo.reference.generate import hashed_case
from rheo.reference.instance import Instance, Table
from rheo.reference.tree import LabelledTree
from rheo.reference.tree import build_tree as reference_build_tree

KINDS = {"lead": 0, "sample": 1, "fill": 2}
KIND_NAMES = {v: k for k, v in KINDS.items()}
PROB_TOLERANCE = 1e-9


class ImplLoadError(ValueError):
    """--impl names nothing usable; the message says what to give instead."""


@dataclass
class Implementation:
    """A loaded implementation and what it provides."""

    obj: Any  # the user's object: its methods are found by name
    name: str

    @property
    def builds_trees(self) -> bool:
        return callable(getattr(self.obj, "build_tree", None))

    @property
    def verifies(self) -> bool:
        return callable(getattr(self.obj, "verify", None))

    @property
    def follows_uniforms(self) -> bool:
        return bool(getattr(self.obj, "follows_uniforms", True))

    def supports(self, config: dict) -> bool:
        fn = getattr(self.obj, "supports", None)
        return True if fn is None else bool(fn(config))

    def provides(self) -> str:
        return " and ".join(p for p, ok in (("tree builder", self.builds_trees), ("verifier", self.verifies)) if ok)


def load_implementation(spec: str) -> Implementation:
    """``package.module:object`` (the current directory is importable) or
    ``path/to/file.py:object``; a class is instantiated without arguments."""
    if ":" not in spec:
        raise ImplLoadError(
            f"--impl: expected MODULE:OBJECT (e.g. examples.loop_impl:LoopImplementation), got {spec!r}"
        )
    mod_name, attr = spec.rsplit(":", 1)
    if mod_name.endswith(".py"):
        path = Path(mod_name).resolve()
        try:
            rel = path.relative_to(Path.cwd().resolve())
        except ValueError:
            raise ImplLoadError(
                f"--impl: {mod_name} is outside the current directory; run rheo from a folder "
                "above it or give a dotted module name"
            ) from None
        mod_name = ".".join(rel.with_suffix("").parts)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(mod_name)
    except ImportError as e:
        raise ImplLoadError(
            f"--impl: cannot import module {mod_name!r} ({e}); run rheo from the folder that holds "
            "it, or install its package"
        ) from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise ImplLoadError(f"--impl: module {mod_name!r} has no attribute {attr!r}")
    if isinstance(obj, type):
        obj = obj()
    impl = Implementation(obj, spec)
    if not (impl.builds_trees or impl.verifies):
        raise ImplLoadError(
            f"--impl: {spec} has neither build_tree nor verify (see docs/gate.md, "
            '"Checking another implementation", for the protocol)'
        )
    return impl


# ---- what the implementation is given ----


def protocol_config(inst: Instance) -> dict:
    """The config dict the implementation receives (``Params.to_protocol``)."""
    return inst.config.to_protocol(inst.n)


def _logits(law) -> np.ndarray:
    p = np.array([float(x) for x in law], dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.log(p)


def draft_logits_fn(inst: Instance):
    """paths -> [len(paths), V] draft logits (the table's law, untruncated)."""

    def draft_logits(paths):
        return np.stack([_logits(inst.draft(tuple(int(t) for t in p))) for p in paths])

    return draft_logits


def target_logits(inst: Instance, paths: list) -> np.ndarray:
    """[len(paths)+1, V]: the root, then each node's token path."""
    return np.stack([_logits(inst.target(()))] + [_logits(inst.target(tuple(p))) for p in paths])


def protocol_uniforms(u: Uniforms) -> dict:
    return {
        "u_sample": np.array(u.u_sample, dtype=np.float64),
        "u_det": np.array(u.u_det, dtype=np.float64),
        "u_final": np.array(u.u_final, dtype=np.float64),
    }


def reference_tree(inst: Instance, tree) -> dict:
    """The reference's pruned tree in the protocol's format (order-key order), plus
    ``paths`` (token paths) and ``slot_paths``."""
    pruned = tree.pruned
    index = {n.slot_path: i for i, n in enumerate(pruned)}
    probs = np.zeros((len(pruned), inst.n))
    for i, n in enumerate(pruned):
        if n.kind == "sample":
            residual = inst.node_laws(n.prefix[:-1]).residual
            assert residual is not None  # a sample node's parent has a residual law
            probs[i] = [float(x) for x in residual]
    return {
        "tokens": np.array([n.token for n in pruned], dtype=np.int64),
        "parents": np.array([index.get(n.slot_path[:-1], -1) for n in pruned], dtype=np.int64),
        "kinds": np.array([KINDS[n.kind] for n in pruned], dtype=np.int64),
        "slots": np.array([n.slot_path[-1] for n in pruned], dtype=np.int64),
        "sample_probs": probs,
        "paths": [n.prefix for n in pruned],
        "slot_paths": [n.slot_path for n in pruned],
    }


class BadOutput(ValueError):
    """The implementation returned something outside the protocol."""


def _field(obj, name):
    value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
    if value is None:
        raise BadOutput(f"missing {name!r}")
    return value


def read_tree(tree, inst: Instance) -> dict:
    """Check an implementation's tree and add token paths and slot paths."""
    cols = {}
    for name in ("tokens", "parents", "kinds", "slots"):
        a = np.asarray(_field(tree, name))
        if a.ndim != 1:
            raise BadOutput(f"{name} has shape {a.shape}, expected [R]")
        cols[name] = [int(x) for x in a]
    R = len(cols["tokens"])
    if any(len(v) != R for v in cols.values()):
        raise BadOutput(f"tokens, parents, kinds and slots must have one length; got {[len(v) for v in cols.values()]}")
    probs = np.asarray(_field(tree, "sample_probs"), dtype=np.float64)
    if probs.shape != (R, inst.n):
        raise BadOutput(f"sample_probs has shape {probs.shape}, expected [R, V] = [{R}, {inst.n}]")
    for i in range(R):
        if not (-1 <= cols["parents"][i] < R) or cols["parents"][i] == i:
            raise BadOutput(f"node {i}: parent {cols['parents'][i]} is not -1 or another node's index")
        if cols["kinds"][i] not in KIND_NAMES:
            raise BadOutput(f"node {i}: kind {cols['kinds'][i]} is not 0 (lead), 1 (sample) or 2 (fill)")
        if not 0 <= cols["tokens"][i] < inst.n:
            raise BadOutput(f"node {i}: token {cols['tokens'][i]} is outside the vocabulary 0..{inst.n - 1}")
    paths, slot_paths = [], []
    for i in range(R):
        path: list[int] = []
        slots: list[int] = []
        j = i
        while j != -1:
            if len(path) > R:
                raise BadOutput(f"node {i}: its parents form a cycle")
            path.append(cols["tokens"][j])
            slots.append(cols["slots"][j])
            j = cols["parents"][j]
        paths.append(tuple(reversed(path)))
        slot_paths.append(tuple(reversed(slots)))
    return {**cols, "sample_probs": probs, "paths": paths, "slot_paths": slot_paths}


def _describe_nodes(nodes) -> str:
    return (
        ", ".join(f"token path {list(path)} ({kind}, slot path {list(slots)})" for slots, path, kind in sorted(nodes))
        or "none"
    )


def _labelled(t: dict) -> set:
    return {(s, p, KIND_NAMES[k]) for s, p, k in zip(t["slot_paths"], t["paths"], t["kinds"])}


def _compare_trees(got: dict, ref: dict) -> str | None:
    a, b = _labelled(got), _labelled(ref)
    if a != b:
        return (
            f"tree: reference nodes missing from the implementation's tree: {_describe_nodes(b - a)}; "
            f"nodes the reference does not have: {_describe_nodes(a - b)}"
        )
    ref_rows = {sp: i for i, sp in enumerate(ref["slot_paths"])}
    for i, sp in enumerate(got["slot_paths"]):
        if got["kinds"][i] == KINDS["sample"]:
            j = ref_rows[sp]
            gap = float(np.max(np.abs(got["sample_probs"][i] - ref["sample_probs"][j])))
            if gap > PROB_TOLERANCE:
                return (
                    f"tree: the residual law of the sample at token path {list(got['paths'][i])} is "
                    f"{np.round(got['sample_probs'][i], 6).tolist()}, the reference's is "
                    f"{np.round(ref['sample_probs'][j], 6).tolist()} (max difference {gap:.3g})"
                )
    return None


def _read_result(res) -> tuple[tuple, list]:
    tokens = tuple(int(x) for x in np.asarray(_field(res, "tokens")).reshape(-1))
    accepted = [int(x) for x in np.asarray(_field(res, "accepted")).reshape(-1)]
    return tokens, accepted


JITTER = 1e-11  # relative; far above float64 rounding, far below the 1e-9 margin


def _jittered_law(law, sign: int) -> tuple:
    """``law`` with each distinct value scaled by 1 + sign * JITTER * h, h in [1/2, 1) a hash
    of (the whole vector, the value), renormalized. Equal values in one vector, and identical
    vectors at different nodes, move together (softmax keeps those ties exact in any float
    implementation); different values, and equal values in different vectors, move apart."""
    vec = tuple(float(x) for x in law)
    key = repr(vec).encode()
    scaled = []
    for x in vec:
        h = hashlib.blake2b(key + repr(x).encode(), digest_size=8).digest()
        scaled.append(x * (1 + sign * JITTER * (0.5 + int.from_bytes(h, "big") / 2**65)))
    total = sum(scaled)
    return tuple(x / total for x in scaled)


def _jittered_draft(inst: Instance, sign: int, prefix: tuple[int, ...]) -> tuple:
    return _jittered_law(inst.draft(prefix), sign)


def fragile_tree(inst: Instance, uniforms: Uniforms, tree) -> bool:
    """Whether T_R hinges on a score tie that float rounding may break either way, such as
    q = 1/4 against 1/2 * 1/2: exact in the reference, but a float implementation gets
    logits and its softmax rounds 1/4 and 1/2 on its own. Ties between equal probabilities
    of one vector (or of identical vectors), alone or as the same factors in another
    order (1/2 * 1/4 against 1/4 * 1/2), stay exact for any float implementation, and are
    compared. Decided by rebuilding the tree on draft laws jittered both ways."""
    for sign in (1, -1):
        draft = Table("draft", {}, fn=functools.partial(_jittered_draft, inst, sign))
        jittered = Instance(inst.n, inst.target, draft, inst.config)
        if reference_build_tree(jittered, UniformChooser(uniforms)).labelled != tree.labelled:
            return True
    return False


def call_build_tree(impl: Implementation, inst: Instance, uniforms: Uniforms) -> dict:
    """The implementation's tree for ``inst`` on these uniforms, checked (``read_tree``)."""
    raw = impl.obj.build_tree(
        draft_logits_fn(inst),
        protocol_config(inst),
        inst.config.temperature.value,
        np.array(uniforms.u_draw, dtype=np.float64),
    )
    return read_tree(raw, inst)


def call_verify(impl: Implementation, inst: Instance, tree: dict, uniforms: Uniforms) -> tuple[tuple, list]:
    """(emitted tokens, accepted node indices) of the implementation's verifier on ``tree``."""
    res = impl.obj.verify(
        {k: tree[k] for k in ("tokens", "parents", "kinds", "slots", "sample_probs")},
        target_logits(inst, tree["paths"]),
        protocol_config(inst),
        inst.config.temperature.value,
        protocol_uniforms(uniforms),
    )
    return _read_result(res)


@dataclass
class Comparison:
    """One example: the verdict and, for the counterexample file, both sides' answers."""

    check: RequestCheck
    reference: dict = field(default_factory=dict)
    implementation: dict = field(default_factory=dict)


def compare_decisions(impl: Implementation, inst: Instance, uniforms: Uniforms) -> Comparison:
    """The implementation against ``simulate_cycle`` on the same uniforms (docs/spec.md §7): its tree
    builder on the same draft logits, its verifier on the reference's tree."""
    tree, output, accepted, margin = reference_cycle(inst, uniforms)
    if margin <= MARGIN:
        return Comparison(RequestCheck("near", f"a decision within {margin:.3g} of its threshold"))
    if impl.builds_trees and fragile_tree(inst, uniforms, tree):
        return Comparison(RequestCheck("near", "a score tie that float rounding decides"))
    ref = reference_tree(inst, tree)
    acc_rows = [ref["slot_paths"].index(sp) for sp in accepted]
    out = Comparison(
        RequestCheck("equal"), reference={"tree": _tree_json(ref), "tokens": list(output), "accepted": acc_rows}
    )
    if impl.builds_trees:
        try:
            got = call_build_tree(impl, inst, uniforms)
        except BadOutput as e:
            out.check = RequestCheck("differs", f"build_tree returned a malformed tree: {e}")
            return out
        except Exception as e:  # the implementation crashed: that is a finding, with its message
            out.check = RequestCheck("differs", f"build_tree raised {type(e).__name__}: {e}")
            return out
        out.implementation["tree"] = _tree_json(got)
        diff = _compare_trees(got, ref)
        if diff:
            out.check = RequestCheck("differs", diff)
            return out
    if impl.verifies:
        try:
            tokens, acc = call_verify(impl, inst, ref, uniforms)
        except BadOutput as e:
            out.check = RequestCheck("differs", f"verify returned a malformed result: {e}")
            return out
        except Exception as e:
            out.check = RequestCheck("differs", f"verify raised {type(e).__name__}: {e}")
            return out
        out.implementation.update(tokens=list(tokens), accepted=acc)
        if tokens != tuple(output) or acc != acc_rows:
            out.check = RequestCheck(
                "differs",
                f"verify on the reference's tree: emitted {list(tokens)} accepting "
                f"nodes {acc}; the reference emits {list(output)} accepting {acc_rows}",
            )
    return out


def _tree_json(t: dict) -> dict:
    return {
        "tokens": [int(x) for x in t["tokens"]],
        "parents": [int(x) for x in t["parents"]],
        "kinds": [int(x) for x in t["kinds"]],
        "slots": [int(x) for x in t["slots"]],
        "paths": [list(p) for p in t["paths"]],
        "sample_probs": {
            str(i): np.round(np.asarray(t["sample_probs"][i]), 12).tolist()
            for i, k in enumerate(t["kinds"])
            if k == KINDS["sample"]
        },
    }


def impl_cycle(impl: Implementation, inst: Instance, uniforms: Uniforms) -> tuple:
    """One cycle's output with the implementation's parts (the reference fills in a part it
    does not provide)."""
    if impl.builds_trees:
        got = call_build_tree(impl, inst, uniforms)
    else:
        got = reference_tree(inst, reference_build_tree(inst, UniformChooser(uniforms)))
    if impl.verifies:
        return call_verify(impl, inst, got, uniforms)[0]
    labelled = LabelledTree((s, p[-1], KIND_NAMES[k]) for s, p, k in zip(got["slot_paths"], got["paths"], got["kinds"]))
    return walk(inst, labelled, UniformChooser(uniforms))[0]


# ---- counterexample files ----


def counterexample_payload(impl: Implementation, case: dict, uniforms: Uniforms, cmp: Comparison) -> dict:
    return {
        "check": "decision equality",
        "implementation": impl.name,
        "difference": cmp.check.detail,
        "case": case,
        "uniforms": {
            "u_draw": list(map(float, uniforms.u_draw)),
            "u_sample": list(map(float, uniforms.u_sample)),
            "u_det": [list(map(float, row)) for row in uniforms.u_det],
            "u_final": list(map(float, uniforms.u_final)),
        },
        "reference_answer": cmp.reference,
        "implementation_answer": cmp.implementation,
        "replay": f"rheo gate --impl {impl.name} --replay FILE",
    }


def float_instance(case: dict) -> Instance:
    """The float64 instance the harness compares on (an exact case read in float64)."""
    return load_case({**case, "arithmetic": "float64"})


def replay(impl: Implementation, path: str | Path) -> Comparison:
    """Rerun the comparison saved in a counterexample file."""
    saved = json.loads(Path(path).read_text(encoding="utf-8"))
    u = saved["uniforms"]
    return compare_decisions(
        impl, float_instance(saved["case"]), Uniforms(u["u_draw"], u["u_sample"], u["u_det"], u["u_final"])
    )


# ---- the two checks ----


def decision_examples():
    """Small exact cases (every policy, m, beam, budget, T in {0, 1/3, 1/2, 1}, sparse on/off,
    target filters; small integer weights, half of them with dyadic draft laws, so exact
    score ties are common) and a seed for the uniforms."""
    return st.tuples(st.one_of(cases(filters=True), cases(filters=True, dyadic_draft=True)), st.integers(0, 2**32 - 1))


def check_decisions(impl: Implementation, examples: int, seed: int | None = 0) -> Outcome:
    """Search ``examples`` cases for a decision the implementation takes differently from the
    reference; a difference is shrunk by Hypothesis. ``seed`` None = a fresh random search
    (its seed is reported), an int = derandomized (the same search every run)."""
    if not impl.follows_uniforms:
        return Outcome("skip", "skipped: the implementation declares follows_uniforms = False", data={"skipped": True})
    seen = {"equal": 0, "near": 0, "unsupported": 0, "differs": 0}

    def run(example):
        case, useed = example
        inst = float_instance(case)
        if not impl.supports(protocol_config(inst)):
            seen["unsupported"] += 1
            return None
        c = inst.config
        u = Uniforms.random(np.random.default_rng(useed), c.K, c.B, c.depth)
        return compare_decisions(impl, inst, u), u

    def differs(example):
        got = run(example)
        status = "unsupported" if got is None else got[0].check.status
        if got is not None:
            seen[status] += 1
        return status == "differs"

    found, seed = shrunk_search(decision_examples(), differs, examples, seed)
    counts = (
        f"{seen['equal']} equal, {seen['near']} set aside (a decision within 1e-9 of its threshold, or a "
        f"score tie rounding decides), {seen['unsupported']} unsupported"
    )
    data = {"examples": examples, "seed": seed, **seen}
    if found is None:
        if seen["equal"] == 0:
            return Outcome("fail", f"no example was compared ({counts}): nothing is proven", data=data)
        return Outcome("pass", f"{examples} cases searched (seed {seed}): {counts}", data=data)
    case, useed = found
    cmp, u = run(found)
    payload = counterexample_payload(impl, case, u, cmp)
    return Outcome(
        "fail",
        f"{cmp.check.detail} (shrunk: V={case['vocab_size']}, policy {case['policy']}, "
        f"K={case['K']}, depth {case['depth']}, budget {case['budget']})",
        payload,
        data,
    )


def statistical_cases(deep: bool = False) -> dict:
    """Fixed generated cases for the cycle-law check (exact laws known by enumeration)."""
    out = {
        "rheo_m1_fills": hashed_case(4, 1, 3, policy="rheo", K=3, m=1, budget=6, beam=2, temperature="1"),
        "rheo_m0_sparse_top_p": hashed_case(
            5,
            4,
            2,
            zero_share=2,
            policy="rheo",
            K=3,
            m=0,
            budget=5,
            beam=2,
            temperature="1/2",
            draft_top_k=4,
            target_top_p="9/10",
        ),
        "topk": hashed_case(4, 3, 3, policy="topk", K=2, budget=5, beam=2, temperature="1"),
    }
    if deep:
        out["rheo_m2_min_p"] = hashed_case(
            4, 4, 3, policy="rheo", K=3, m=2, budget=5, beam=1, temperature="1/3", target_min_p="1/20"
        )
    return out


def check_cycle_law(
    impl: Implementation, cycles: int, family_alpha: float = 1e-6, seed: int = 0, deep: bool = False, progress=None
) -> Outcome:
    """The implementation's empirical cycle law over ``cycles`` cycles per case against the
    reference's exact law (Pearson chi-square on counts; ``family_alpha`` split over the
    cases; the detectable TV at power 0.99 is reported per case)."""
    stat_cases = statistical_cases(deep)
    alpha = family_alpha / len(stat_cases)
    rng = np.random.default_rng(seed)
    lines, data, worst = [], {}, None
    for name, case in stat_cases.items():
        inst = float_instance(case)
        if not impl.supports(protocol_config(inst)):
            lines.append(f"{name}: unsupported")
            continue
        law = {o: float(p) for o, p in cycle_law(load_case(case), "classes", count_draws=False).law.items()}
        c = inst.config
        counts: Counter = Counter()
        for i in range(cycles):
            counts[impl_cycle(impl, inst, Uniforms.random(rng, c.K, c.B, c.depth))] += 1
            if progress and (i + 1) % 5000 == 0:
                progress(f"  cycle law {name}: {i + 1}/{cycles} cycles")
        res = gof(counts, law, alpha)
        data[name] = {
            "reject": res.reject,
            "p_value": res.p_value,
            "chi2": res.statistic,
            "bins": res.bins,
            "detectable_tv": res.detectable_tv,
            "impossible": [list(o) for o in res.impossible[:5]],
        }
        lines.append(f"{name}: {res.describe()}")
        if res.reject and worst is None:
            top = sorted(law, key=lambda o: -abs(counts.get(o, 0) / cycles - law[o]))[:5]
            worst = {
                "check": "cycle law",
                "implementation": impl.name,
                "case_name": name,
                "case": case,
                "cycles": cycles,
                "seed": seed,
                "alpha": alpha,
                "result": res.describe(),
                "largest_gaps": [
                    {"output": list(o), "observed": counts.get(o, 0) / cycles, "exact": law[o]} for o in top
                ],
                "impossible_outputs": [list(o) for o in res.impossible[:5]],
            }
    if not data:
        return Outcome("fail", "no statistical case is supported: nothing is proven", data=data)
    detail = f"{cycles} cycles per case, alpha {alpha:.2g} per case: " + "; ".join(lines)
    return Outcome("fail" if worst else "pass", detail, worst, data)
