"""The cycle-law check, for implementations that declare ``implements_spec = True``: the
empirical cycle law against the reference's exact law on fixed generated cases. Equal laws
show sameness; a difference shows "not the specified algorithm" (the output law judges
losslessness).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from rheo.casefile import load_case
from rheo.checks.outcome import Outcome
from rheo.checks.protocol.calls import impl_cycle
from rheo.checks.protocol.inputs import float_instance, protocol_config
from rheo.checks.protocol.load import Implementation
from rheo.checks.protocol.outputs import BadOutput
from rheo.checks.statistics.goodness_of_fit import gof
from rheo.checks.statistics.output_law import STATISTICAL_MIN_CASES, gof_json, law_line
from rheo.progress import Meter
from rheo.reference import Uniforms, cycle_law
from rheo.reference.generate import hashed_case


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
    impl: Implementation,
    cycles: int,
    family_alpha: float = 1e-6,
    seed: int = 0,
    deep: bool = False,
    progress=None,
    min_cases: int = STATISTICAL_MIN_CASES,
) -> Outcome:
    """For implementations of docs/spec.md's algorithm (``implements_spec = True``): the
    empirical cycle law over ``cycles`` cycles per case against the reference's exact law
    (Pearson chi-square on counts; ``family_alpha`` split over the cases; the detectable TV
    at power 0.99 is reported per case). Equal laws show sameness; a difference shows "not
    the specified algorithm" (the output law judges losslessness)."""
    stat_cases = statistical_cases(deep)
    alpha = family_alpha / len(stat_cases)
    rng = np.random.default_rng(seed)
    lines: list[str] = []
    data: dict[str, Any] = {}
    worst: dict[str, Any] | None = None
    unsupported: list[str] = []
    for name, case in stat_cases.items():
        inst = float_instance(case)
        if not impl.supports(protocol_config(inst)):
            unsupported.append(name)
            continue
        law = {o: float(p) for o, p in cycle_law(load_case(case), "classes", count_draws=False).law.items()}
        c = inst.config
        counts: Counter = Counter()
        meter = Meter(f"cycle law, {name}", cycles, progress, unit="cycles")
        try:
            for i in range(cycles):
                counts[impl_cycle(impl, inst, Uniforms.random(rng, c.K, c.B, c.depth))] += 1
                meter.update(i + 1)
            meter.close()
        except NotImplementedError:
            unsupported.append(name)
            continue
        except BadOutput as e:
            return Outcome("fail", f"not the specified algorithm: on {name}, {e}", data=data)
        res = gof(counts, law, alpha)
        data[name] = gof_json(res)
        lines.append(law_line(name, res, "same cycle law as the reference", "a different cycle law"))
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
    if len(data) < min_cases:
        return Outcome(
            "fail",
            f"{len(data)} of {len(stat_cases)} statistical cases supported, fewer than the minimum {min_cases}: "
            "nothing is proven",
            data=data,
        )
    head = (
        f"not the specified algorithm: its cycle law differs on {worst['case_name']}"
        if worst
        else f"same cycle law as the reference on {len(data)} cases"
    )
    detail = f"{head} ({cycles} cycles per case, alpha {alpha:.2g} per case): " + "; ".join(lines)
    if unsupported:
        detail += f"; unsupported: {', '.join(unsupported)}"
    return Outcome("fail" if worst else "pass", detail, worst, data)
