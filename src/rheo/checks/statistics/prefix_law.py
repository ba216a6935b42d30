"""The prefix-law check: losslessness, statistically, on cases beyond exact reach (docs/spec.md
§5; the large cases of ``rheo.checks.cases.large``: V up to 1,024, depth up to 6, budgets
up to 60), where a chi-square over whole sequences in V^(D+1) would have far too many bins.

As the batched V = 32,000 check does (``check_large_vocabulary``), each case is judged by
the first token's law and the conditional laws at frequent prefixes: the implementation's
cycles through the per-request protocol (``impl_cycle``, fresh uniforms each cycle), each
output read as the first tokens of a sequence continued by exact sampling from the judged
target law; then for k = 0..D the next token given each tested prefix s of length k
against p_T(. | s), a Pearson chi-square on counts with its own detectable TV. The tested
prefixes are the root, then at each length the ``TOP_PREFIXES`` most frequent extensions
of the prefixes tested one shorter, each with at least ``MIN_PREFIX_SAMPLES`` cycles. A
sequence is continued only where a test needs it: at a tested prefix, the cycles whose
output ended there draw their next token together (a multinomial over p_T(. | s), the law
of drawing each in turn).

Why this is a test of losslessness: for a lossless implementation the continued sequence
has law p_T(Seq), so given the first k tokens of every cycle, the k+1-th tokens are
independent draws from p_T(. | first k); which prefixes are tested depends only on the
first k tokens, so each test has its stated false-positive rate, and the family alpha is
split (Bonferroni) over every test a case could run (1 + TOP_PREFIXES x D per case),
fixed before any cycle runs.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import Any

import numpy as np

from rheo.checks import parallel
from rheo.checks.cases.large import is_large, large_instance
from rheo.checks.outcome import QUICK_PREFIX_CYCLES, Outcome
from rheo.checks.protocol.calls import impl_cycle
from rheo.checks.protocol.inputs import law_instance, protocol_config
from rheo.checks.protocol.judged import judged_instance
from rheo.checks.protocol.load import Implementation, implementation_of, shipped
from rheo.checks.protocol.outputs import BadOutput
from rheo.checks.statistics.goodness_of_fit import GofResult, gof
from rheo.checks.statistics.output_law import (
    STATISTICAL_MIN_CASES,
    gof_json,
    metered_shards,
    thin_data,
    thin_evidence,
)
from rheo.checks.statistics.sizing import Budget, Sizing, sized_counts
from rheo.reference import Uniforms
from rheo.reference.instance import Instance
from rheo.reference.params import Prefix

TOP_PREFIXES = 3  # tested prefixes per length: the most frequent extensions of the ones before
MIN_PREFIX_SAMPLES = 100  # a prefix is tested only with at least this many cycles through it
FORGET_EVERY = 50  # cycles between clearing an instance's law caches (V = 1,024: 30 kB a law)
TICK = 100  # cycles between progress ticks


def case_instance(case: dict) -> Instance:
    """The float64 instance a case runs on: a large case's generated tables, else the
    output law's (``law_instance``)."""
    return large_instance(case) if is_large(case) else law_instance(case)


def forget(inst: Instance) -> None:
    """Clear an instance's per-prefix caches: at V = 1,024 each cached law is tens of kB, and
    the deep prefixes of a long run are mostly seen once."""
    inst._target_cache.clear()
    inst._node_cache.clear()
    inst._checked.clear()


def emitted_outputs(impl: Implementation, inst: Instance, cycles: int, rng: np.random.Generator) -> Counter:
    """Counts of the implementation's cycle outputs as emitted (token tuples, not continued)."""
    c = inst.config
    counts: Counter = Counter()
    for i in range(cycles):
        counts[tuple(impl_cycle(impl, inst, Uniforms.random(rng, c.K, c.B, c.depth)))] += 1
        if (i + 1) % FORGET_EVERY == 0:
            forget(inst)
        if (i + 1) % TICK == 0:
            parallel.tick(TICK)
    parallel.tick(cycles % TICK)
    return counts


def prefix_law_shard(ref: Implementation | str, case: dict, cycles: int, seed: int) -> Counter:
    """One shard: ``cycles`` emitted outputs of the implementation on ``case``."""
    impl = implementation_of(ref)
    inst = judged_instance(impl, case_instance(case))
    return emitted_outputs(impl, inst, cycles, np.random.default_rng(seed))


def prefix_tests(
    outputs: Counter, judged: Instance, rng: np.random.Generator, top: int = TOP_PREFIXES
) -> list[tuple[Prefix, Counter, dict]]:
    """(prefix s, counts of the next token given s, p_T(. | s)) for the root and the tested
    prefixes (see the module docstring), the outputs continued by exact sampling where a
    test needs it. A token outside the vocabulary is counted as it is (probability 0)."""
    L = judged.seq_len
    level: list[tuple[Prefix, int, Counter]] = [((), 0, Counter(outputs))]  # (prefix, ended there, live outputs)
    tests: list[tuple[Prefix, Counter, dict]] = []
    for k in range(L):
        children: list[tuple[Prefix, int, Counter]] = []
        for s, ended, live in level:
            probs = np.array(judged.target_law(s), dtype=np.float64)
            nxt: Counter = Counter()
            grow: dict[int, Counter] = {}
            stop: Counter = Counter()
            for o, c in live.items():
                x = o[k]
                nxt[x] += c
                if len(o) > k + 1:
                    grow.setdefault(x, Counter())[o] += c
                else:
                    stop[x] += c
            if ended:
                for x, c in enumerate(rng.multinomial(ended, probs / probs.sum())):
                    if c:
                        nxt[x] += int(c)
                        stop[x] += int(c)
            tests.append((s, nxt, {x: float(p) for x, p in enumerate(probs) if p > 0}))
            children += [(s + (x,), stop[x], grow.get(x, Counter())) for x in nxt if 0 <= x < judged.n]
        children.sort(key=lambda ch: (-(ch[1] + sum(ch[2].values())), ch[0]))
        level = [ch for ch in children[:top] if ch[1] + sum(ch[2].values()) >= MIN_PREFIX_SAMPLES]
        if not level:
            break
    return tests


def _what(prefix: Prefix) -> str:
    return "first token" if not prefix else f"token {len(prefix) + 1} | {list(prefix)}"


def case_tests(case: dict) -> int:
    """The most tests a case can run: the root and TOP_PREFIXES per length 1..D."""
    return 1 + TOP_PREFIXES * int(case["depth"])


def _supported(impl: Implementation, cases: list[dict]) -> tuple[list[tuple[str, dict, Instance]], list[str]]:
    out, unsupported = [], []
    seen: Counter = Counter()
    for i, case in enumerate(cases, 1):
        name = str(case.get("name") or f"case {i}")
        seen[name] += 1
        name = name if seen[name] == 1 else f"{name} #{seen[name]}"
        inst = case_instance(case)
        if impl.supports(protocol_config(inst)):
            out.append((name, case, inst))
        else:
            unsupported.append(name)
    return out, unsupported


def check_prefix_law(
    impl: Implementation,
    cases: list[dict],
    cycles: int | None = None,
    tv: float | None = None,
    time_budget: float | None = None,
    family_alpha: float = 1e-6,
    seed: int = 0,
    progress=None,
) -> Outcome:
    """Losslessness on ``cases`` (large cases, or any case dicts) by the first token's law
    and the conditional laws at frequent prefixes (the module docstring), ``cycles`` per case
    (or sized by ``tv`` / ``time_budget``: ``rheo.checks.statistics.sizing``; the first
    token's test is the one sized). Unsupported cases are skipped and counted; fewer than
    one compared case fails ("nothing is proven"). A rejection writes the case, the test,
    the worst tokens and the seed. ``cycles`` None: the quick profile's count."""
    sizing = Sizing(cycles or QUICK_PREFIX_CYCLES, tv, time_budget)
    supported, unsupported = _supported(impl, list(cases))
    data: dict[str, Any] = {
        "seed": seed,
        "sizing": sizing.describe(),
        "top_prefixes": TOP_PREFIXES,
        "min_prefix_samples": MIN_PREFIX_SAMPLES,
        "cases": {},
        "unsupported": unsupported,
    }
    nothing = f"{{}} of {len(cases)} cases supported, fewer than the minimum {STATISTICAL_MIN_CASES}: nothing is proven"
    if len(supported) < STATISTICAL_MIN_CASES:
        return Outcome("fail", nothing.format(len(supported)), data=data)
    alpha = family_alpha / sum(case_tests(c) for _, c, _ in supported)
    data["alpha"] = alpha
    budget = Budget(sizing, len(supported))
    lines, worst = [], None
    for index, (name, case, inst) in enumerate(supported):
        t0 = time.perf_counter()
        share = budget.share()
        try:
            judged = judged_instance(impl, inst)
            root = {x: float(p) for x, p in enumerate(judged.target_law(())) if p > 0}

            def run(n: int, part: int, case=case, index=index, name=name) -> Counter:
                calls = [
                    (shipped(impl), case, m, parallel.shard_seed(seed, index, 1000 * part + k))
                    for k, m in enumerate(parallel.shards(n, parallel.SHARD_CYCLES))
                ]
                return metered_shards(prefix_law_shard, calls, f"prefix law, {name}", progress)

            outputs, how = sized_counts(run, sizing, share, root, alpha)
            tests = prefix_tests(outputs, judged, np.random.default_rng([seed, index]))
        except NotImplementedError:
            unsupported.append(name)
            continue
        except BadOutput as e:
            detail = f"the implementation broke the protocol on {name}: {e}"
            payload = {"check": "prefix law", "implementation": impl.name, "case_name": name, "case": case}
            return Outcome("fail", detail, {**payload, "difference": str(e), "seed": seed}, data)
        results = [(s, counts, law, gof(counts, law, alpha)) for s, counts, law in tests]
        n = sum(outputs.values())
        first = results[0][3]
        data["cases"][name] = {
            "cycles": n,
            "detectable_tv": first.detectable_tv,
            **how,
            "tests": {_what(s): test_json(r) for s, _, _, r in results},
            "seconds": time.perf_counter() - t0,
        }
        bad = [(s, counts, law, r) for s, counts, law, r in results if r.reject]
        lines.append(_case_line(name, n, results, bad))
        if bad and worst is None:
            worst = _counterexample(impl, name, case, seed, alpha, n, *bad[0])
        forget(inst)
    if len(data["cases"]) < STATISTICAL_MIN_CASES:
        return Outcome("fail", nothing.format(len(data["cases"])), data=data)
    k = len(data["cases"])
    tvs = sorted(c["detectable_tv"] for c in data["cases"].values() if math.isfinite(c["detectable_tv"]))
    span = "no TV bound (single-bin laws)"
    if tvs:
        span = f"{tvs[0]:.4f}" if f"{tvs[0]:.4f}" == f"{tvs[-1]:.4f}" else f"{tvs[0]:.4f} to {tvs[-1]:.4f}"
        span = f"within detectable TV {span}"
    head = (
        f"not lossless on {worst['case_name']}"
        if worst
        else f"lossless on {k} cases as far as these tests show, the first token {span}{thin_evidence(tvs)}"
    )
    detail = (
        f"{head} ({sizing.describe()}, alpha {alpha:.2g} per test, {k} of {len(cases)} cases supported): "
        + "; ".join(lines)
    )
    if unsupported:
        detail += f"; unsupported: {', '.join(unsupported)}"
    thin = None if worst else thin_data(data["cases"])
    if thin:
        data["thin_evidence"] = thin
    return Outcome("fail" if worst else "pass", detail, worst, data)


def test_json(r: GofResult) -> dict:
    """``output_law.gof_json`` of one token's test, with its sample size; the impossible
    outcomes are tokens."""
    return {**gof_json(r, int), "n": r.n}


def _case_line(name: str, n: int, results: list, bad: list) -> str:
    first = results[0][3]
    deeper = ""
    if len(results) > 1:
        tvs = [r.detectable_tv for _, _, _, r in results[1:] if r.bins > 1]
        single = len(results) - 1 - len(tvs)
        span = f"detectable TV {min(tvs):.3f} to {max(tvs):.3f}" if tvs else "no TV bound"
        span += f"; {single} of one bin" if single else ""
        deeper = f", {len(results) - 1} conditional tests ({span})"
    if bad:
        s, _, _, r = bad[0]
        return f"{name}: NOT lossless at the {_what(s)} ({r.describe()}; {n} cycles)"
    if first.bins < 2:
        return f"{name}: {n} cycles, first token of one bin (no TV bound){deeper}"
    return f"{name}: {n} cycles, first token within detectable TV {first.detectable_tv:.4f}{deeper}"


def _counterexample(
    impl: Implementation, name: str, case: dict, seed: int, alpha: float, n: int, s: Prefix, counts, law, r: GofResult
) -> dict:
    m = sum(counts.values())
    top = sorted(set(law) | set(counts), key=lambda x: -abs(counts.get(x, 0) / m - law.get(x, 0.0)))[:5]
    return {
        "check": "prefix law",
        "implementation": impl.name,
        "case_name": name,
        "case": case,
        "cycles": n,
        "seed": seed,
        "alpha": alpha,
        "prefix": list(s),
        "test": _what(s),
        "result": r.describe(),
        "worst_tokens": [{"token": x, "observed": counts.get(x, 0) / m, "p_T": law.get(x, 0.0)} for x in top],
        "rerun": f"rheo gate --impl {impl.name} --only 'beyond exact reach' --cycles {n}",
    }
