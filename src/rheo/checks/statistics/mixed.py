"""Mixed batches at scale, and the permutation check (docs/adapters.md, "Mixed batches").

- ``mixed_row_laws``: ``calls`` calls of ``cycle_batch`` on one batch of different requests;
  each row's outputs, continued to D+1 tokens by exact sampling from its own judged target
  law, against p_T(Seq) of that row (chi-square, Bonferroni over the rows, the detectable TV
  stated per row).
- ``permutation_check``: for an implementation whose rows take their own seeded generator
  (``row_seeds = True``: ``config[r]["seed"]`` seeds row r), the same requests with the same
  seeds in shuffled row orders: each request must get the same tokens wherever it sits.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from rheo.checks.protocol.calls import call_cycle_mixed
from rheo.checks.protocol.inputs import law_instance
from rheo.checks.protocol.judged import judged_instance
from rheo.checks.protocol.load import Implementation
from rheo.checks.statistics.goodness_of_fit import GofResult, gof
from rheo.checks.statistics.output_law import sequence_law


def _continued(inst, seq: tuple, rng: np.random.Generator) -> tuple:
    """``seq`` continued to the instance's D+1 tokens from its target law (an output that is
    empty, too long or outside the vocabulary is kept as it is: probability 0)."""
    if not (1 <= len(seq) <= inst.seq_len and all(0 <= t < inst.n for t in seq)):
        return seq
    while len(seq) < inst.seq_len:
        law = np.array(inst.target_law(seq), dtype=np.float64)
        seq = seq + (int(rng.choice(inst.n, p=law / law.sum())),)
    return seq


def mixed_row_laws(
    impl: Implementation, cases: list[dict], calls: int, alpha: float, seed: int = 0, progress=None
) -> list[tuple[dict, GofResult]]:
    """(case, its goodness of fit) for each row of the batch ``cases`` over ``calls`` calls
    (module docstring); ``alpha`` is each row's level."""
    insts = [law_instance(c) for c in cases]
    judged = [judged_instance(impl, inst) for inst in insts]
    rng = np.random.default_rng(seed)
    counts: list[Counter] = [Counter() for _ in cases]
    seeded = bool(getattr(impl.obj, "row_seeds", False))
    for i in range(calls):
        seeds = [int(s) for s in rng.integers(2**31, size=len(cases))] if seeded else None
        for r, out in enumerate(call_cycle_mixed(impl, insts, seeds)):
            counts[r][_continued(judged[r], tuple(out), rng)] += 1
        if progress and (i + 1) % 1000 == 0:
            progress(f"  mixed batch of {len(cases)} rows: {i + 1}/{calls} calls")
    return [(case, gof(counts[r], sequence_law(judged[r]), alpha)) for r, case in enumerate(cases)]


def permutation_check(impl: Implementation, cases: list[dict], trials: int, seed: int = 0) -> tuple[bool, str, dict]:
    """(passed, one line, data): ``trials`` seed sets, each run in the given row order and in
    a shuffled one; the first request whose tokens moved with its row is named."""
    insts = [law_instance(c) for c in cases]
    rng = np.random.default_rng(seed)
    rows = len(cases)
    for trial in range(trials):
        seeds = [int(s) for s in rng.integers(2**31, size=rows)]
        first = call_cycle_mixed(impl, insts, seeds)
        order = [int(i) for i in rng.permutation(rows)]
        if order == list(range(rows)):
            order = order[1:] + order[:1]
        again = call_cycle_mixed(impl, [insts[i] for i in order], [seeds[i] for i in order])
        for position, request in enumerate(order):
            if tuple(again[position]) != tuple(first[request]):
                line = (
                    f"request {request} ({cases[request].get('name')}, seed {seeds[request]}) got "
                    f"{list(first[request])} in row {request} and {list(again[position])} in row {position} "
                    f"(row order {order}): its tokens depend on its place in the batch"
                )
                data = {"trial": trial, "request": request, "order": order, "seeds": seeds}
                return False, line, data
        same = call_cycle_mixed(impl, insts, seeds)
        if [tuple(x) for x in same] != [tuple(x) for x in first]:
            return False, "the same batch with the same seeds gave other tokens: the seeds are not honoured", {}
    return True, f"{trials} seed sets, each request the same tokens in a shuffled row order", {"trials": trials}
