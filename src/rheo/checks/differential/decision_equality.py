"""Decision equality of an implementation (``rheo gate --impl``): on the same uniforms
(docs/spec.md §7), its tree (every node's token path, kind, slot path and the sample's
residual law within 1e-9) and its verifier's output and accepted path (on the reference's
tree) must equal the reference's. Decisions within 1e-9 of a threshold, and score ties that
float rounding decides (``fragile_tree``), are set aside and counted. Hypothesis draws
small cases from the configurations the implementation supports and shrinks a difference
to a minimal counterexample: "not the specified algorithm" (it may still be lossless).
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from rheo.checks.cases.corpus import shrunk_search
from rheo.checks.cases.matrix import impl_matrix
from rheo.checks.cases.strategies import cases, cases_from_configs, config_pool
from rheo.checks.differential.decisions import MARGIN, RequestCheck, reference_cycle
from rheo.checks.outcome import Outcome, Progress
from rheo.checks.protocol.calls import call_build_tree, call_verify
from rheo.checks.protocol.inputs import KIND_NAMES, KINDS, case_config, float_instance, protocol_config, reference_tree
from rheo.checks.protocol.load import Implementation
from rheo.checks.protocol.outputs import BadOutput
from rheo.progress import Meter
from rheo.reference import UniformChooser, Uniforms
from rheo.reference.instance import Instance, Table
from rheo.reference.tree import build_tree as reference_build_tree

PROB_TOLERANCE = 1e-9


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
        jittered = Instance(inst.n, inst.target, draft, inst.config, target_logits=inst.target_logits)
        if reference_build_tree(jittered, UniformChooser(uniforms)).labelled != tree.labelled:
            return True
    return False


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
        except NotImplementedError as e:
            return Comparison(RequestCheck("unsupported", f"build_tree raised NotImplementedError: {e}"))
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
        except NotImplementedError as e:
            return Comparison(RequestCheck("unsupported", f"verify raised NotImplementedError: {e}"))
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


def replay(impl: Implementation, path: str | Path) -> Comparison:
    """Rerun the comparison saved in a counterexample file."""
    saved = json.loads(Path(path).read_text(encoding="utf-8"))
    u = saved["uniforms"]
    return compare_decisions(
        impl, float_instance(saved["case"]), Uniforms(u["u_draw"], u["u_sample"], u["u_det"], u["u_final"])
    )


def decision_examples(configs: list[dict] | None = None):
    """Small exact cases and a seed for the uniforms. Without ``configs``: every policy, m,
    beam, budget, T in {0, 1/3, 1/2, 1}, sparse on/off, target filters (``cases``); with
    ``configs`` (case dicts without tables): one of them, with drawn tables. Small integer
    weights, half of them with dyadic draft laws, so exact score ties are common."""
    if configs is None:
        tables = st.one_of(cases(filters=True), cases(filters=True, dyadic_draft=True))
    else:
        tables = st.one_of(cases_from_configs(configs), cases_from_configs(configs, dyadic_draft=True))
    return st.tuples(tables, st.integers(0, 2**32 - 1))


POOL_SIZE = 3000  # configurations drawn before the search; those the implementation supports are searched


def supported_configs(impl: Implementation, seed: int) -> tuple[list[dict], int]:
    """(the configurations of the decision search that ``impl.supports``, simplest first;
    how many were asked): ``POOL_SIZE`` drawn like ``cases(filters=True)`` from ``seed``,
    plus those of ``impl_matrix("deep")``."""
    matrix = [{k: v for k, v in c.items() if k not in ("name", "target", "draft")} for c in impl_matrix("deep")]
    pool = config_pool(seed, POOL_SIZE, extra=matrix)
    keep = [c for c in pool if impl.supports(case_config(c))]
    return keep, len(pool)


def check_decisions(
    impl: Implementation,
    examples: int,
    seed: int | None = 0,
    min_compared: int = 1,
    configs: list[dict] | None = None,
    progress: Progress | None = None,
) -> Outcome:
    """Search ``examples`` cases for a decision the implementation takes differently from the
    reference; a difference is shrunk by Hypothesis. Only configurations the implementation
    supports are drawn (``supported_configs``, or ``configs`` when given). ``seed`` None = a
    fresh random search (its seed is reported), an int = derandomized (the same search every
    run). Fewer than ``min_compared`` compared cases fail: nothing is proven."""
    if not impl.follows_uniforms:
        return Outcome(
            "skip",
            "skipped: the implementation declares follows_uniforms = False (its output law judges it)",
            data={"skipped": True},
        )
    if seed is None:
        seed = random.SystemRandom().randrange(2**32)
    if configs is None:
        configs, asked = supported_configs(impl, seed)
        # every configuration supported: draw configurations with Hypothesis itself (its
        # bias toward small budgets and boundary values finds exact score ties sooner)
        strategy = decision_examples() if len(configs) == asked else decision_examples(configs)
    else:
        configs, asked = [c for c in configs if impl.supports(case_config(c))], len(configs)
        strategy = decision_examples(configs)
    seen = {"equal": 0, "near": 0, "unsupported": 0, "differs": 0}
    data: dict[str, Any] = {
        "examples": examples,
        "seed": seed,
        **seen,
        "configurations": asked,
        "supported_configurations": len(configs),
        "minimum": min_compared,
    }
    if not configs:
        return Outcome(
            "fail",
            f"none of {asked} configurations is supported (supports(config) is False for every one): nothing is proven",
            data=data,
        )

    def run(example):
        case, useed = example
        inst = float_instance(case)
        if not impl.supports(protocol_config(inst)):  # drawn outside the pool (a full implementation's rare gap)
            return Comparison(RequestCheck("unsupported", "supports(config) is False")), None
        c = inst.config
        u = Uniforms.random(np.random.default_rng(useed), c.K, c.B, c.depth)
        return compare_decisions(impl, inst, u), u

    meter = Meter("decision equality", examples, progress, unit="examples")

    def differs(example):
        cmp, _ = run(example)
        seen[cmp.check.status] += 1
        meter.advance()  # past ``examples``: shrinking a difference (the total is then unknown)
        return cmp.check.status == "differs"

    found, seed = shrunk_search(strategy, differs, examples, seed)
    meter.close()
    data.update(seen, seed=seed)
    counts = (
        f"{examples} cases searched (seed {seed}): {seen['equal']} equal, {seen['near']} set aside (a decision "
        f"within 1e-9 of its threshold, or a score tie rounding decides), {seen['unsupported']} unsupported "
        f"(NotImplementedError, or supports False); {len(configs)} of {asked} configurations supported"
    )
    if found is None:
        if seen["equal"] == 0:
            return Outcome("fail", f"no example was compared ({counts}): nothing is proven", data=data)
        if seen["equal"] < min_compared:
            return Outcome(
                "fail",
                f"only {seen['equal']} cases compared, fewer than the minimum {min_compared} ({counts}): "
                "nothing is proven",
                data=data,
            )
        return Outcome(
            "pass",
            f"same decisions as the reference on {seen['equal']} cases (minimum {min_compared}; {counts})",
            data=data,
        )
    case, useed = found
    cmp, u = run(found)
    payload = counterexample_payload(impl, case, u, cmp)
    broke = cmp.check.detail.startswith(("build_tree returned a malformed", "verify returned a malformed")) or (
        cmp.check.detail.startswith(("build_tree raised", "verify raised"))
    )  # a malformed answer or a crash is not another algorithm
    head = "the implementation broke the protocol" if broke else "not the specified algorithm"
    return Outcome(
        "fail",
        f"{head}: {cmp.check.detail} (shrunk: V={case['vocab_size']}, policy {case['policy']}, "
        f"K={case['K']}, depth {case['depth']}, budget {case['budget']})",
        payload,
        data,
    )
