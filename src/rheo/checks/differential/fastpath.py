"""Decision-by-decision comparison of the fastpath with the reference simulator (docs/spec.md §7).

Both engines get the same uniforms; the fastpath runs a whole batch at once, the reference
``simulate_cycle`` runs each request on a float64 ``Instance`` holding the same laws. They
must build the same T_R (tokens, kinds, slot paths) and emit the same output along the same
accepted path, wherever no decision is within ``MARGIN`` of its threshold
(``rheo.checks.differential.decisions``). Needs torch.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from hypothesis import strategies as st

from rheo.checks.differential import FASTPATH_NAMES
from rheo.checks.differential.decisions import MARGIN, RequestCheck, reference_cycle
from rheo.fastpath import FastConfig, TargetFilters, verify
from rheo.fastpath import Uniforms as FastUniforms
from rheo.fastpath import build_tree as fast_build_tree
from rheo.reference import Uniforms
from rheo.testing import HashTableModel, PrefixTableModel


def compare(fast_tree, fast_result, i: int, inst, uniforms: Uniforms, margin: float = MARGIN) -> RequestCheck:
    """Request i of a fastpath batch against the reference on the same uniforms."""
    tree, output, accepted, closest = reference_cycle(inst, uniforms)
    if closest <= margin:
        return RequestCheck("near", f"a decision within {closest:.3g} of its threshold")
    ref_nodes = list(tree.labelled.nodes)
    fast_nodes = fast_tree.request(i)
    if ref_nodes != fast_nodes:
        return RequestCheck("differs", f"tree: reference {ref_nodes} vs fastpath {fast_nodes}")
    fast_out = fast_result.output(i)
    if tuple(output) != fast_out:
        return RequestCheck("differs", f"output: reference {tuple(output)} vs fastpath {fast_out}")
    paths = fast_tree.slot_paths(i)
    fast_acc = [paths[j] for j in fast_result.accepted[i].tolist() if j >= 0]
    if fast_acc != list(accepted):
        return RequestCheck("differs", f"accepted: reference {accepted} vs fastpath {fast_acc}")
    return RequestCheck("equal")


def compare_batch(model, cfg, temperatures, rng, device="cpu"):
    """One batch through the fastpath and each request through the reference, on the same
    fresh uniforms (drawn from the numpy Generator ``rng``). ``model`` implements the
    fastpath's model interface and ``reference_instance(i, cfg, T)``; it is not advanced
    (its reference tables read its current state). Returns (checks, tree, result)."""
    ref_u = [Uniforms.random(rng, cfg.K, cfg.B, cfg.depth) for _ in temperatures]
    insts = [model.reference_instance(i, cfg, t) for i, t in enumerate(temperatures)]
    uniforms = FastUniforms.stack(ref_u, device=device)
    T = torch.tensor(list(temperatures), dtype=torch.float64, device=device)
    tree = fast_build_tree(model.draft_logits, cfg, T, uniforms)
    result = verify(tree, model.target_logits(tree), T, cfg, uniforms)
    checks = [compare(tree, result, i, inst, u) for i, (inst, u) in enumerate(zip(insts, ref_u))]
    return checks, tree, result


TEMPERATURES = (0.0, 0.5, 0.8, 1.0, 1.5)


def fast_configs(variants: bool = True):
    """A Hypothesis strategy of (V, FastConfig): every policy, m, depth 1-4, beam, budget,
    draft_top_k, target filters, and (``variants``) the wrong-on-purpose variants."""

    @st.composite
    def draw_config(draw):
        K = draw(st.integers(1, 4))
        policy = draw(st.sampled_from(("rheo", "rheo", "topk")))
        m = draw(st.integers(0, K - 1))
        depth = draw(st.integers(1, 4))
        beam = draw(st.integers(1, K))
        budget = draw(st.integers(1, K * (1 + beam * (depth - 1))))
        V = draw(st.integers(2, 7))
        top_k = draw(st.one_of(st.none(), st.integers(1, V)))
        kw = {}
        if variants and policy == "rheo":
            kw["proxy"] = draw(st.sampled_from(("rheo", "rheo", "self", 0.25, 0.6)))
            kw["verify"] = draw(st.sampled_from(("rheo", "rheo", "sample_last", "class_law")))
            kw["draft_law"] = draw(st.sampled_from(("sampled", "sampled", "dense", "untempered")))
            kw["epsilon"] = draw(st.sampled_from((0.0, 0.0, 0.05)))
        if variants:
            kw["tie_break"] = draw(st.sampled_from(("slot", "slot", "token")))
        filters = TargetFilters(
            draw(st.one_of(st.none(), st.integers(1, V))),
            draw(st.one_of(st.none(), st.sampled_from((0.5, 0.75, 0.9)))),
            draw(st.one_of(st.none(), st.sampled_from((0.05, 0.2)))),
        )
        cfg = FastConfig(
            K=K, depth=depth, budget=budget, policy=policy, m=m, beam=beam, draft_top_k=top_k, filters=filters, **kw
        )
        return V, cfg

    return draw_config()


def fast_examples(variants: bool = True):
    """(V, cfg) from ``fast_configs`` plus a table-model seed, draft noise, a share of
    zero-probability tokens and three per-request temperatures."""
    return st.fixed_dictionaries(
        {
            "case": fast_configs(variants),
            "seed": st.integers(0, 2**31 - 1),
            "noise": st.sampled_from((0.3, 1.0, 3.0)),
            "zeros": st.sampled_from((0.0, 0.0, 0.3)),
            "temps": st.lists(st.sampled_from(TEMPERATURES), min_size=3, max_size=3),
        }
    )


def check_example(example: dict, device="cpu"):
    """The checks of one ``fast_examples`` example (float64 table model, same uniforms)."""
    return run_example(example, device)[0]


def run_example(example: dict, device="cpu"):
    """One ``fast_examples`` example through both engines: (checks, tree, result), the
    fastpath's tree and result kept for the value-range checks (``rheo.testing.ranges``)."""
    V, cfg = example["case"]
    temps = example["temps"]
    model = HashTableModel(
        V,
        len(temps),
        seed=example["seed"] % 10_000,
        rows=4096,
        draft_noise=example["noise"],
        zero_fraction=example["zeros"],
        dtype=torch.float64,
        device=device,
    )
    return compare_batch(model, cfg, temps, np.random.default_rng(example["seed"]), device)


def designed_ties() -> dict:
    """Designed cases whose decisions hinge on *exact* ties (values exactly representable,
    so both engines see the tie): name -> (model, cfg list, temperatures, seeds).

    - score ties: a uniform draft law at every node, so every node of a layer scores the
      same and the beam and pruning are decided by the tie-break alone (slot path; token
      path for the control), for m = 0, 1, 2;
    - draft_top_k boundary: draft logits (2, 1, 1, 1, 0, 1), keeping 3 must take ids 0, 1, 2;
    - depth ties: a one-hot draft law (factor exactly 1), a child scores exactly its
      parent's score and must come after it, every budget 1..8;
    - target ties: T = 0 takes the lowest id among the argmax; target_top_k keeps the lower ids;
    - a float32 near tie (``float32_near_tie``): a float32 model whose two depth-2 path scores
      differ by less than half a float32 ulp, so that only float64 path scores keep them apart.
    """
    flat5 = PrefixTableModel(5, 4, lambda i, pre: [float(t % 3) for t in range(5)], lambda i, pre: [0.0] * 5)
    out = {}
    for tie_break in ("slot", "token"):
        out[f"score ties, tie_break {tie_break}"] = (
            flat5,
            [FastConfig(K=3, depth=3, budget=7, m=m, beam=2, tie_break=tie_break, draft_top_k=None) for m in (0, 1, 2)],
            [1.0, 0.5, 0.0, 1.5],
            range(40),
        )
    out["draft_top_k boundary ties"] = (
        PrefixTableModel(
            6, 2, lambda i, pre: [0.5, 0.1, 0.3, 0.2, 0.0, 0.4], lambda i, pre: [2.0, 1.0, 1.0, 1.0, 0.0, 1.0]
        ),
        [
            FastConfig(K=3, depth=2, budget=12, m=m, policy=policy, draft_top_k=3)
            for m, policy in ((0, "rheo"), (1, "rheo"), (0, "topk"))
        ],
        [1.0, 0.0],
        range(20),
    )
    inf = float("-inf")
    out["depth ties"] = (
        PrefixTableModel(
            4,
            2,
            lambda i, pre: [0.3, 0.1, 0.2, 0.0],
            lambda i, pre: [0.0, inf, inf, inf] if len(pre) % 2 else [1.0, 0.0, 0.5, -1.0],
        ),
        [FastConfig(K=2, depth=3, budget=b, m=1, draft_top_k=None) for b in range(1, 9)],
        [1.0, 0.5],
        range(10),
    )
    out["target ties (greedy, target_top_k)"] = (
        PrefixTableModel(5, 2, lambda i, pre: [1.0, 2.0, 2.0, 0.0, 2.0], lambda i, pre: [0.5, 0.0, 1.0, 0.2, 0.1]),
        [
            FastConfig(K=2, depth=2, budget=4, m=1, draft_top_k=None, filters=TargetFilters(top_k=k))
            for k in (None, 1, 2)
        ],
        [0.0, 1.0],
        range(20),
    )
    out["float32 near tie (path scores float64)"] = float32_near_tie()
    return out


# float32 logits (exactly representable) of the near tie: the root's draft law is softmax(0, R),
# the law after token 0 softmax(0, S), after token 1 softmax(0, T)
NEAR_TIE_LOGITS = (-0.800000011920929, -1.0052000284194946, -0.3899368941783905)


def float32_near_tie() -> tuple:
    """A designed case (``designed_ties``'s shape) that only float64 path scores decide.

    V = 2, policy "topk", K = 2, depth 2: the root's children a0 > a1, under token 0 the laws
    (b0, b1), under token 1 (c0, c1), all float32 softmaxes of ``NEAR_TIE_LOGITS``. The
    logits are chosen so that each float32 law sums to exactly 1 (the reference checks a law's
    sum to 1e-9, and a float32 softmax is off by up to 1e-7). The
    depth-2 scores A = a0 b1 (slot path (0, 1)) and B = a1 c0 (slot path (1, 0)) satisfy
    B > A with (B - A) / B about 1.8e-8: above the comparison's 1e-9 margin, below half a
    float32 ulp, so float32(A) == float32(B). The products of float32 factors are exact in
    float64, and the reference is handed the same float32 laws (``law_dtype``). With budget 4
    (a0, a0 b0, a1, then one of A and B) T_R must hold B; scores multiplied in float32 tie,
    the slot path decides, and T_R holds A instead. Budgets 3 and 5 do not cut between them.
    """
    r, s, t = NEAR_TIE_LOGITS
    draft = {(): [0.0, r], (0,): [0.0, s], (1,): [0.0, t]}
    f32 = torch.float32
    model = PrefixTableModel(
        2, 2, lambda i, pre: [0.0, 0.0], lambda i, pre: draft.get(pre, [0.0, 0.0]), dtype=f32, law_dtype=f32
    )
    cfgs = [FastConfig(K=2, depth=2, budget=R, beam=2, policy="topk", draft_top_k=None) for R in (3, 4, 5)]
    return model, cfgs, [1.0, 0.0], range(5)


def check_designed_ties(scenario: tuple, device="cpu") -> tuple[int, list]:
    """Run one ``designed_ties`` scenario on ``device`` (its model answering there): (requests
    compared, details of every request that was not "equal"; near-threshold counts as a
    failure here, since the ties are exact; and every value out of range in the fastpath's
    tree and result, ``rheo.testing.ranges``)."""
    from rheo.testing.ranges import result_violations, tree_violations

    model, cfgs, temps, seeds = scenario
    model = copy.copy(model)  # the scenario's model, answering on ``device``
    model.device = torch.device(device)
    bad, n = [], 0
    for cfg in cfgs:
        for seed in seeds:
            checks, tree, result = compare_batch(model, cfg, temps, np.random.default_rng(seed), device)
            for i, c in enumerate(checks):
                n += 1
                if c.status != "equal":
                    bad.append(f"{cfg} seed {seed} request {i}: {c.status} {c.detail}")
            V = model.vocab_size
            bad += [f"{cfg} seed {seed}: {v}" for v in tree_violations(tree, cfg, V)]
            bad += [f"{cfg} seed {seed}: {v}" for v in result_violations(result, tree, cfg, V)]
    return n, bad


__all__ = list(FASTPATH_NAMES)  # listed once, in the package (loaded from there on first use)
