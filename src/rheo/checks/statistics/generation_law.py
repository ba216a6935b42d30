"""The output law of whole generations (the protocol's ``generate``), statistically: the
implementation's generations of n_tokens tokens counted over V^n_tokens against the
target's n-token law p_T (the product of the judged target law at each prefix, docs/spec.md
§5) by Pearson chi-square on counts (``goodness_of_fit.gof``), the family alpha split over
the cases, the detectable TV stated per case, in shards with their own seeds
(``output_law.metered_shards``) as the single-cycle output law. It needs no enumeration, so
it reaches what exact certification cannot follow or afford.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import numpy as np

from rheo.checks import parallel
from rheo.checks.cases.generations import generation_cases
from rheo.checks.outcome import Outcome
from rheo.checks.protocol.generation import (
    generation_config,
    generation_sequence_law,
    impl_generate,
    n_tokens_of,
)
from rheo.checks.protocol.inputs import law_instance
from rheo.checks.protocol.judged import judged_instance
from rheo.checks.protocol.load import Implementation, implementation_of, shipped
from rheo.checks.protocol.outputs import BadOutput
from rheo.checks.statistics.goodness_of_fit import gof
from rheo.checks.statistics.output_law import (
    STATISTICAL_MIN_CASES,
    TICK,
    _named,
    gof_json,
    law_counterexample,
    law_head,
    law_line,
    metered_shards,
    thin_data,
)
from rheo.reference.stops import stops_of

CHECK = "output law, whole generations"


def generation_counts(impl: Implementation, case: dict, generations: int, seed: int) -> Counter:
    """Counts over V^n_tokens of ``generations`` whole generations of the implementation on
    ``case`` (its own randomness, global seeds set from ``seed``)."""
    import random

    inst = law_instance(case)
    n = n_tokens_of(case)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    _seed_torch(seed)
    counts: Counter = Counter()
    for i in range(generations):
        counts[impl_generate(impl, inst, n)] += 1
        if (i + 1) % TICK == 0:
            parallel.tick(TICK)
    parallel.tick(generations % TICK)
    return counts


def _seed_torch(seed: int) -> None:
    import sys

    torch = sys.modules.get("torch")  # seeded only when the implementation brought it in
    if torch is not None:
        torch.manual_seed(seed)


def generation_law_shard(ref: Implementation | str, case: dict, generations: int, seed: int) -> Counter:
    """One shard of the check (a piece of work: rheo.checks.parallel)."""
    return generation_counts(implementation_of(ref), case, generations, seed)


def check_generation_law(
    impl: Implementation,
    generations: int,
    family_alpha: float = 1e-6,
    seed: int = 0,
    level: str = "quick",
    extra_cases: list[dict] | tuple = (),
    progress=None,
    min_cases: int = STATISTICAL_MIN_CASES,
) -> Outcome:
    """Losslessness of whole generations, statistically: on ``generation_cases(level)`` and
    the user's ``extra_cases``, ``generations`` generations per case against p_T on
    V^n_tokens (``gof``; ``family_alpha`` split over the supported cases; the detectable TV
    at power 0.99 per case). A rejection writes the case, the worst sequences and the seed."""
    stat_cases = _named(generation_cases(level) + list(extra_cases))
    supported: list[tuple[str, dict]] = []
    unsupported: list[tuple[str, dict]] = []
    for name, case in stat_cases:
        ok = impl.supports(generation_config(law_instance(case), n_tokens_of(case)))
        (supported if ok else unsupported).append((name, case))
    judge = "its own sampler_law" if impl.has_sampler_law else "p_T of docs/spec.md §0"
    data: dict[str, Any] = {
        "generations": generations,
        "seed": seed,
        "judged_against": "sampler_law" if impl.has_sampler_law else "spec",
        "minimum": min_cases,
        "cases": {},
        "unsupported": [name for name, _ in unsupported],
    }
    if len(supported) < min_cases:
        return Outcome(
            "fail",
            f"{len(supported)} of {len(stat_cases)} cases supported, fewer than the minimum {min_cases}: "
            "nothing is proven",
            data=data,
        )
    alpha = family_alpha / len(supported)
    data["alpha"] = alpha
    lines, worst, seconds = [], None, 0.0
    index = {name: i for i, (name, _) in enumerate(stat_cases)}
    for name, case in supported:
        t0 = time.perf_counter()
        n = n_tokens_of(case)
        calls = [
            (shipped(impl), case, k, parallel.shard_seed(seed, index[name], j))
            for j, k in enumerate(parallel.shards(generations, parallel.SHARD_CYCLES))
        ]
        try:
            law = generation_sequence_law(judged_instance(impl, law_instance(case)), n, stops_of(case))
            counts = metered_shards(generation_law_shard, calls, f"{CHECK}, {name}", progress)
        except NotImplementedError:
            data["unsupported"].append(name)
            continue
        except BadOutput as e:
            payload = {"check": CHECK, "implementation": impl.name, "case_name": name, "case": case}
            detail = f"the implementation broke the protocol on {name}: {e}"
            return Outcome("fail", detail, {**payload, "difference": str(e), "seed": seed}, data)
        seconds += time.perf_counter() - t0
        res = gof(counts, law, alpha)
        data["cases"][name] = {**gof_json(res), "n_tokens": n, "seconds": time.perf_counter() - t0}
        lines.append(law_line(name, res, "lossless", "NOT lossless"))
        if res.reject and worst is None:
            worst = law_counterexample(CHECK, impl, name, case, judge, seed, alpha, res, counts, law)
    if len(data["cases"]) < min_cases:
        return Outcome(
            "fail",
            f"{len(data['cases'])} of {len(stat_cases)} cases supported, fewer than the minimum {min_cases}: "
            "nothing is proven",
            data=data,
        )
    n_cases, head = len(data["cases"]), law_head(data["cases"], worst, generations)
    data["generations_per_second"] = n_cases * generations / seconds if seconds > 0 else None
    rate = f", {data['generations_per_second']:,.0f} generations per second" if data["generations_per_second"] else ""
    detail = (
        f"{head} ({generations} generations per case against {judge} on V^n_tokens, alpha {alpha:.2g} per case, "
        f"{n_cases} of {len(stat_cases)} cases supported, minimum {min_cases}{rate}): " + "; ".join(lines)
    )
    if data["unsupported"]:
        detail += f"; unsupported: {', '.join(data['unsupported'])}"
    thin = None if worst else thin_data(data["cases"])
    if thin:
        data["thin_evidence"] = thin
    return Outcome("fail" if worst else "pass", detail, worst, data)
