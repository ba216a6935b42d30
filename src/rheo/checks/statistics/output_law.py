"""The output-law check (losslessness, statistically; docs/spec.md §5): an implementation's
cycles, each output continued by exact sampling from the judged target law to length D+1,
against p_T(Seq) on V^(D+1): Pearson chi-square on counts, the family alpha split over the
cases, the detectable TV stated per case ("lossless within detectable TV d"). A rejection
writes the worst sequences (observed against p_T) and the seed.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from rheo.checks import parallel
from rheo.checks.cases.matrix import output_law_cases
from rheo.checks.outcome import Outcome
from rheo.checks.protocol.calls import impl_cycle
from rheo.checks.protocol.example_tree import path_line, with_example_tree
from rheo.checks.protocol.inputs import law_instance, protocol_config
from rheo.checks.protocol.judged import composition_words, judged_instance, sampler_law_difference
from rheo.checks.protocol.load import Implementation, implementation_of, shipped
from rheo.checks.protocol.outputs import BadOutput
from rheo.checks.statistics.goodness_of_fit import GofResult, gof
from rheo.checks.statistics.sizing import Budget, Sizing, sized_counts
from rheo.progress import Meter
from rheo.reference import Uniforms
from rheo.reference.instance import Instance

STATISTICAL_MIN_CASES = 1  # a statistical check with fewer supported cases proves nothing
PART_OFFSET = 100_000  # a sized case's run number n (0 the first) seeds as case index + n x this


def sequence_law(inst: Instance) -> dict[tuple, float]:
    """p_T(Seq) = prod_i p_T(Seq_i | Seq_<i) for every Seq in V^(D+1) of positive mass
    (docs/spec.md §5), with ``inst.target_law`` (a ``judged_instance``'s: its sampler law)."""
    out: dict[tuple, float] = {}
    stack: list[tuple[tuple, float]] = [((), 1.0)]
    while stack:
        prefix, pr = stack.pop()
        if len(prefix) == inst.seq_len:
            out[prefix] = pr
            continue
        law = inst.target_law(prefix)
        stack.extend((prefix + (x,), pr * float(law[x])) for x in range(inst.n) if law[x] > 0)
    return out


TICK = 1000  # cycles between the progress meter's ticks


def continued_outputs(
    impl: Implementation,
    inst: Instance,
    cycles: int,
    rng: np.random.Generator,
    progress=None,
    label: str = "",
    lengths: Counter | None = None,
) -> Counter:
    """Counts over V^(D+1) of the implementation's cycle outputs (fresh uniforms each cycle)
    continued by exact sampling from ``inst.target_law`` (inverse CDF, docs/spec.md §7). An
    output that is empty, longer than D+1 or outside the vocabulary is counted as it is (it
    has probability 0). ``lengths``, when given, counts the outputs' own lengths (tokens per
    cycle: accepted drafts and the final token)."""
    c, L, n = inst.config, inst.seq_len, inst.n
    cdfs: dict[tuple, np.ndarray] = {}
    counts: Counter = Counter()
    for i in range(cycles):
        seq = tuple(impl_cycle(impl, inst, Uniforms.random(rng, c.K, c.B, c.depth)))
        if lengths is not None:
            lengths[len(seq)] += 1
        if 1 <= len(seq) <= L and all(0 <= t < n for t in seq):
            while len(seq) < L:
                cdf = cdfs.get(seq)
                if cdf is None:
                    cdf = cdfs[seq] = np.cumsum(np.array(inst.target_law(seq), dtype=np.float64))
                x = int(np.searchsorted(cdf, rng.random(), side="right"))
                if x >= n:  # rounding left the total below u: the last token with mass
                    x = int(np.flatnonzero(np.diff(np.concatenate([[0.0], cdf])) > 0)[-1])
                seq = seq + (x,)
        counts[seq] += 1
        if (i + 1) % TICK == 0:
            parallel.tick(TICK)
            if progress:
                progress(f"  {label}: {i + 1}/{cycles} cycles")
    parallel.tick(cycles % TICK)
    return counts


def law_counterexample(
    check: str,
    impl: Implementation,
    name: str,
    case: dict,
    judge: str,
    seed: int,
    alpha: float,
    res: GofResult,
    counts: Counter,
    law: dict,
) -> dict:
    """The counterexample file of an output-law check that rejected ``case``: the worst
    sequences (observed against p_T), the impossible ones, and the command that reruns it."""
    cycles = sum(counts.values())
    top = sorted(set(law) | set(counts), key=lambda o: -abs(counts.get(o, 0) / cycles - law.get(o, 0.0)))[:5]
    return {
        "check": check,
        "implementation": impl.name,
        "case_name": name,
        "case": case,
        "judged_against": judge,
        "cycles": cycles,
        "seed": seed,
        "alpha": alpha,
        "result": res.describe(),
        "worst_sequences": [
            {"sequence": list(o), "observed": counts.get(o, 0) / cycles, "p_T": law.get(o, 0.0)} for o in top
        ],
        "impossible_sequences": [list(o) for o in res.impossible[:5]],
        "rerun": f"rheo gate --impl {impl.name} --only '{check}' --cycles {cycles}",
    }


THIN_TV = 0.1  # a pass whose detectable TV is above this is thin evidence, and says so


def thin_evidence(tvs: list[float]) -> str:
    """The words a passing statistical verdict adds when its largest detectable TV (``tvs``,
    sorted) is above ``THIN_TV``: such a pass would let a law that far from the target through
    (empty when it is not thin)."""
    if not tvs or tvs[-1] <= THIN_TV:
        return ""
    return (
        f" (thin evidence: a law up to TV {tvs[-1]:.2f} from the target would likely pass too; more cycles, "
        f"--tv {THIN_TV:g} or a longer --time-budget make it stronger)"
    )


def law_head(cases: dict, worst: dict | None, cycles: int, accepts: bool = True) -> str:
    """The first words of an output-law verdict: not lossless on the first rejected case, or
    lossless within the span of detectable TVs over ``cases`` (name -> ``gof_json``), saying
    when that is thin evidence (``thin_evidence``), and when no case accepted a draft
    (``accepts`` False: one token every cycle)."""
    n = len(cases)
    tvs = sorted(c["detectable_tv"] for c in cases.values() if math.isfinite(c["detectable_tv"]))
    if worst:
        return f"not lossless on {worst['case_name']}"
    none = "" if accepts else ", but accepts no draft (one token every cycle)"
    if tvs:
        span = f"{tvs[0]:.4f}" if f"{tvs[0]:.4f}" == f"{tvs[-1]:.4f}" else f"{tvs[0]:.4f} to {tvs[-1]:.4f}"
        return f"lossless on {n} cases{none}, each within detectable TV {span}{thin_evidence(tvs)}"
    return f"lossless on {n} cases{none} as far as {cycles} samples each show (no TV bound: single-bin laws)"


def thin_data(cases: dict) -> dict | None:
    """``data["thin_evidence"]`` of a passing check: its largest detectable TV where that is above
    ``THIN_TV`` (None: not thin)."""
    tvs = [c["detectable_tv"] for c in cases.values() if math.isfinite(c["detectable_tv"])]
    return {"detectable_tv": max(tvs), "threshold": THIN_TV} if tvs and max(tvs) > THIN_TV else None


def per_request_counts(
    impl: Implementation,
    name: str,
    case: dict,
    judged: Instance,
    cycles: int,
    seed: int,
    case_index: int,
    progress=None,
    lengths: Counter | None = None,
) -> Counter:
    """One case's continued outputs through the per-request protocol, in shards of
    ``parallel.SHARD_CYCLES`` cycles, each with its own seed (``output_law_shard``);
    ``lengths``, when given, counts the outputs' own lengths (tokens per cycle)."""
    calls = [
        (shipped(impl), case, n, parallel.shard_seed(seed, case_index, k), lengths is not None)
        for k, n in enumerate(parallel.shards(cycles, parallel.SHARD_CYCLES))
    ]
    counts = metered_shards(output_law_shard, calls, f"output law, {name}", progress)
    if lengths is None:
        return counts
    seqs, found = split_lengths(counts)
    lengths.update(found)
    return seqs


def metered_shards(fn: Callable[..., Counter], calls: list[tuple], what: str, progress=None) -> Counter:
    """The summed counts of statistical shards ``fn(*call)`` (each call's third argument
    its cycles), run where ``parallel.current()`` runs them, with a progress meter: shards
    in this process tick as they go (``parallel.tick``), a Ray task counts when it ends."""
    meter = Meter(what, sum(call[2] for call in calls), progress, unit="cycles")
    executor = parallel.current()
    done = None if isinstance(executor, parallel.Serial) else (lambda i: meter.advance(calls[i][2]))
    with parallel.ticking(meter.advance):
        counts: Counter = sum(executor.map(fn, calls, done), Counter())
    meter.close()
    return counts


def output_law_shard(ref: Implementation | str, case: dict, cycles: int, seed: int, lengths: bool = False) -> Counter:
    """One shard of the output-law check: ``cycles`` continued outputs of the implementation
    on ``case`` (``continued_outputs``), from the shard's own seed; with ``lengths``, the
    outputs' own lengths too, under the keys ``(LENGTH, k)`` (``split_lengths`` parts them)."""
    impl = implementation_of(ref)
    judged = judged_instance(impl, law_instance(case))
    found: Counter | None = Counter() if lengths else None
    counts = continued_outputs(impl, judged, cycles, np.random.default_rng(seed), lengths=found)
    if found:
        counts.update({(LENGTH, k): m for k, m in found.items()})
    return counts


LENGTH = "output length"  # counts[(LENGTH, k)]: a shard's outputs of k tokens (no sequence is keyed by a str)


def split_lengths(counts: Counter) -> tuple[Counter, Counter]:
    """(the continued sequences' counts, the outputs' lengths) of a shard's summed counts."""
    seqs: Counter = Counter()
    lengths: Counter = Counter()
    for key, m in counts.items():
        if len(key) == 2 and key[0] == LENGTH:
            lengths[key[1]] += m
        else:
            seqs[key] = m
    return seqs, lengths


def tokens_per_cycle(lengths: Counter, depth: int) -> dict | None:
    """The sampled tokens per cycle (mean output length) and acceptance rate (mean accepted
    drafts over the depth) of a case's outputs, with the mean's standard error; None without
    lengths (a protocol that does not return them per cycle)."""
    n = sum(lengths.values())
    if not n:
        return None
    mean = sum(k * m for k, m in lengths.items()) / n
    var = sum(m * (k - mean) ** 2 for k, m in lengths.items()) / max(n - 1, 1)
    return {
        "tokens_per_cycle": mean,
        "standard_error": math.sqrt(var / n),
        "acceptance_rate": (mean - 1) / depth if depth > 0 else None,
    }


def _accepted_words(accepted: dict | None) -> str:
    if accepted is None:
        return ""
    rate = accepted["acceptance_rate"]
    return f"; {accepted['tokens_per_cycle']:.3g} tokens per cycle" + (
        f", acceptance rate {rate:.3g}" if rate is not None else ""
    )


def law_line(name: str, res: GofResult, shown: str, refuted: str) -> str:
    """One case's verdict: "NAME: <shown> within detectable TV d (...)" or "NAME: <refuted> (...)"."""
    if res.reject:
        return f"{name}: {refuted} ({res.describe()})"
    if res.bins < 2:
        return (
            f"{name}: {shown} as far as {res.n} samples show (one bin: only an outcome of probability 0 "
            "could reject; no TV bound)"
        )
    return (
        f"{name}: {shown} within detectable TV {res.detectable_tv:.4f} (chi2 = {res.statistic:.1f} on "
        f"{res.bins - 1} df, p = {res.p_value:.3g}, N = {res.n}, {res.merged} merged into the tail)"
    )


def gof_json(res: GofResult, outcome: Callable[[Any], Any] = list) -> dict:
    """One chi-square's JSON; ``outcome`` writes an impossible outcome (a sequence: a list)."""
    return {
        "reject": res.reject,
        "p_value": res.p_value,
        "chi2": res.statistic,
        "bins": res.bins,
        "detectable_tv": res.detectable_tv,
        "impossible": [outcome(o) for o in res.impossible[:5]],
    }


def _supported_cases(impl: Implementation, stat_cases: list[tuple[str, dict]]):
    out: list[tuple[str, dict, Instance]] = []
    unsupported: list[tuple[str, dict, Instance]] = []
    for name, case in stat_cases:
        inst = law_instance(case)
        (out if impl.supports(protocol_config(inst)) else unsupported).append((name, case, inst))
    return out, [name for name, _, _ in unsupported]


def _named(cases_: list[dict]) -> list[tuple[str, dict]]:
    """(a unique name, the case): its "name", else "case i"; repeats get " #k"."""
    out: list[tuple[str, dict]] = []
    seen: Counter = Counter()
    for i, c in enumerate(cases_, 1):
        name = str(c.get("name") or f"case {i}")
        seen[name] += 1
        out.append((name if seen[name] == 1 else f"{name} #{seen[name]}", c))
    return out


def check_output_law(
    impl: Implementation,
    cycles: int,
    family_alpha: float = 1e-6,
    seed: int = 0,
    level: str = "quick",
    extra_cases: list[dict] | tuple = (),
    progress=None,
    min_cases: int = STATISTICAL_MIN_CASES,
    counted: Callable[..., Counter] | None = None,
    check: str = "output law",
    data_extra: dict | None = None,
    tv: float | None = None,
    time_budget: float | None = None,
    cases: list[dict] | None = None,
) -> Outcome:
    """Losslessness, statistically (docs/spec.md §5): on ``cases`` (default
    ``output_law_cases(level)``; the gate passes the covering set of what the implementation
    supports, ``rheo.checks.cases.space``) and the user's ``extra_cases``, ``cycles`` cycles
    of the implementation per case, each output continued by exact sampling from the judged
    target law (``judged_instance``: its sampler_law if it has one, else docs/spec.md §0's
    p_T) to length D+1; the counts over
    V^(D+1) against p_T(Seq) by Pearson chi-square (``gof``; ``family_alpha`` split over the
    supported cases; the detectable TV at power 0.99 per case). A rejection writes the case,
    the worst sequences (observed vs p_T) and the seed.

    ``counted(impl, name, case, judged, cycles, seed, case_index, progress)`` gives one
    case's continued counts (default ``per_request_counts``; the batched check passes its
    own, rheo.checks.statistics.batched), ``check`` names the check in counterexample files.
    ``tv`` / ``time_budget`` size each case's cycles instead (``rheo.checks.statistics.sizing``:
    the fewest that detect TV ``tv``, or the case's share of ``time_budget`` seconds)."""
    counted = counted or per_request_counts
    stat_cases = _named((output_law_cases(level) if cases is None else list(cases)) + list(extra_cases))
    supported, unsupported = _supported_cases(impl, stat_cases)
    judge = "its own sampler_law" if impl.has_sampler_law else "p_T of docs/spec.md §0"
    data: dict[str, Any] = {
        "cycles": cycles,
        "seed": seed,
        "judged_against": "sampler_law" if impl.has_sampler_law else "spec",
        "minimum": min_cases,
        "cases": {},
        "unsupported": unsupported,
        **(data_extra or {}),
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
    lines, worst, differs, seconds, total = [], None, None, 0.0, 0
    index = {name: i for i, (name, _) in enumerate(stat_cases)}
    sizing = Sizing(cycles, tv, time_budget)
    budget = Budget(sizing, len(supported))
    data["sizing"] = sizing.describe()
    broke: list[dict] = []  # the cases where the implementation broke the protocol (a crash, a bad answer)
    for name, case, inst in supported:
        judged = judged_instance(impl, inst)
        t0 = time.perf_counter()
        share = budget.share()
        try:
            law = sequence_law(judged)

            lengths: Counter = Counter()  # the outputs' own lengths, where the protocol gives them per cycle

            def run(n: int, part: int, name=name, case=case, judged=judged, lengths=lengths) -> Counter:
                i = index[name] + PART_OFFSET * part  # part 1: the rest's seeds
                if counted is per_request_counts:
                    return per_request_counts(impl, name, case, judged, n, seed, i, progress, lengths)
                return counted(impl, name, case, judged, n, seed, i, progress)

            counts, how = sized_counts(run, sizing, share, law, alpha)
            gap = sampler_law_difference(judged)
        except NotImplementedError:
            unsupported.append(name)
            continue
        except BadOutput as e:  # a finding; the other cases still run, so that a lossy law is shown too
            payload = {"check": check, "implementation": impl.name, "case_name": name, "case": case}
            broke.append({**payload, "difference": str(e), "seed": seed})
            continue
        seconds += time.perf_counter() - t0
        res = gof(counts, law, alpha)
        total += res.n
        data["cases"][name] = {**gof_json(res), "cycles": res.n, **how, "seconds": time.perf_counter() - t0}
        accepted = tokens_per_cycle(lengths, inst.config.depth)
        if accepted is not None:
            data["cases"][name].update(accepted)
        lines.append(law_line(name, res, "lossless", "NOT lossless") + _accepted_words(accepted))
        if gap is not None and (differs is None or gap[0] > differs["max_abs_difference"]):
            differs = {"max_abs_difference": gap[0], "case": name, "prefix": list(gap[1])}
        if res.reject and worst is None:
            worst = law_counterexample(check, impl, name, case, judge, seed, alpha, res, counts, law)
            worst = with_example_tree(worst, impl, judged, worst["worst_sequences"][0]["sequence"])
            if "worst_tree" in worst:
                lines[-1] += f"; one cycle that begins its worst sequence: {path_line(worst['worst_tree'])}"
    also = ""
    if broke:
        data["crashed"] = [b["case_name"] for b in broke]
        first = broke[0]
        also = (
            f"; the implementation also broke the protocol on {len(broke)} case(s), first "
            f"{first['case_name']}: {first['difference']}"
        )
        if worst is None:
            detail = f"the implementation broke the protocol on {first['case_name']}: {first['difference']}"
            rest = f" (and on {len(broke) - 1} more case(s))" if len(broke) > 1 else ""
            return Outcome(
                "fail", detail + rest + (f"; on the others: {'; '.join(lines)}" if lines else ""), first, data
            )
        worst["also_crashed"] = broke
    if len(data["cases"]) < min_cases:
        return Outcome(
            "fail",
            f"{len(data['cases'])} of {len(stat_cases)} cases supported, fewer than the minimum {min_cases}: "
            "nothing is proven",
            data=data,
        )
    if impl.has_sampler_law:
        data["sampler_law_differs_from_spec"] = differs
    taus = [c["tokens_per_cycle"] for c in data["cases"].values() if "tokens_per_cycle" in c]
    accepts = worst is not None or not taus or max(taus) > 1
    n, head = len(data["cases"]), law_head(data["cases"], worst, cycles, accepts) + also
    if taus and not worst:
        data["accepts_no_draft"] = not accepts
    data["cycles_per_second"] = total / seconds if seconds > 0 else None
    rate = f", {data['cycles_per_second']:,.0f} cycles per second" if data["cycles_per_second"] else ""
    rate += f" on {data['device']}" if rate and "device" in data else ""
    detail = (
        f"{head} ({sizing.describe()} against {judge}, alpha {alpha:.2g} per case, "
        f"{n} of {len(stat_cases)} cases supported, minimum {min_cases}{rate}): " + "; ".join(lines)
    )
    if unsupported:
        detail += f"; unsupported: {', '.join(unsupported)}"
    if differs is not None:
        gap, where = differs["max_abs_difference"], f"case {differs['case']}, prefix {differs['prefix']}"
        detail += (
            f". Its sampler_law differs from docs/spec.md §0 by up to {gap:.3g} ({where}); judged against its "
            "own law, not a finding"
            if gap > 1e-12
            else f". Its sampler_law equals docs/spec.md §0's law on these cases (largest difference {gap:.1g})"
        )
    law_words = composition_words(impl, [case for _, case, _ in supported])
    if law_words:
        data["target_law"] = law_words
        detail += f"; {law_words}"
    thin = None if worst else thin_data(data["cases"])
    if thin:
        data["thin_evidence"] = thin
    return Outcome("fail" if worst else "pass", detail, worst, data)
