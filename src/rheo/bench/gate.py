"""``rheo bench gate``: what the supervised worker costs (docs/gate.md, "The supervised
worker").

The figures, each measured side by side in one run:

1. **per call**: ``watch.watched`` around a call that does nothing, with the worker's
   own hook (``worker.call_hook`` writing to shared memory) against no hook. Rounds
   alternate (A B A B ...) and the medians are compared; the difference is what every call
   into an implementation pays. Target: under 1 ms (it is well under a microsecond).
2. **per run**: one implementation check (decision equality on the example
   implementation) run in the gate's own process and in a supervised worker. The
   difference is the worker's start (a spawned interpreter that imports the
   implementation) plus the per-call cost over every call.
3. **protocols**: the statistical output-law check's cycles per second for the same
   algorithm, the fastpath, through the per-request protocol (numpy, one request per call,
   trees converted) and through the batched torch protocol, on one quick output-law case;
   and the detectable TV per case each reaches in 60 seconds (the formula of the checks:
   chi-square at alpha 1e-6 split over the quick cases, power 0.99). Targets: 1,000,000
   batched cycles within 60 s, a detectable TV of 0.006 or less. Needs torch.

4. **adapter speed**: a cheap adapter's ``cycle`` (``ADAPTER``, a Gumbel-max chain in torch)
   in a plain loop over the same case tables, against the gate's output-law check on the
   same case through the supervised worker (``cycles_per_second`` as the check reports it),
   the worker's torch on one thread (``--threads 1``, the default) and on torch's own count
   (``--threads 0``); the plain loop likewise. Target: the gate within 2x of the plain loop
   at one thread (``plain_over_gate``). Needs torch.

5. **exact certification** (``--exact``, or ``--exact-only``; minutes: ``rheo.bench.exact_impl``):
   an own-randomness verifier (EAGLE's) certified by the replay path and by the one-pass
   path on three depth-3 Rheo-tree cases (runs, seconds, ratio; target: 10x on the largest,
   V=8 D=3 K=4 R=10), a handed-uniform implementation the same two ways, and the largest
   case of a growing ladder the one-pass path certifies within 60 s.

Every target holds on CPU and CUDA alike (``TARGETS``, judged by ``rheo.bench.targets`` on
the device the protocols ran on: the fastpath's, CUDA when torch sees one). Every phase
longer than about 5 s reports progress (``rheo.progress``).
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rheo.bench.exact_impl import run_exact_rows
from rheo.bench.targets import GATE, PER_CALL_TARGET_US, judge, passed, summary
from rheo.checks.cases.matrix import output_law_cases
from rheo.checks.gate import supervised
from rheo.checks.gate.checklist import impl_checks
from rheo.checks.gate.run import run_checks
from rheo.checks.outcome import FAMILY_ALPHA, PROFILES
from rheo.checks.protocol import watch, worker
from rheo.checks.protocol.inputs import draft_logits_fn, law_instance, protocol_config, target_logits_fn
from rheo.checks.protocol.load import Implementation, load_implementation
from rheo.checks.statistics.goodness_of_fit import detectable_tv, merge_bins
from rheo.checks.statistics.output_law import continued_outputs, sequence_law
from rheo.progress import Meter
from rheo.reference import make_instance

EXAMPLE = "examples.loop_impl:LoopImplementation"
CHECK = "decision equality"


def _nothing() -> None:
    return None


def per_call(calls: int, rounds: int, progress: Callable[[str], object] | None = None) -> dict:
    """Microseconds per watched call, with the worker's hook and without, alternating."""
    inst = make_instance(3, ["1/5", "1/2", "3/10"], ["1/2", "3/10", "1/5"], policy="rheo", K=3, m=1, depth=1, budget=2)
    hook = worker.call_hook(worker.shared_watch(multiprocessing.get_context("spawn")))
    watched = watch.watched

    def timed(h: Callable[[str, str, str], None] | None) -> float:
        watch.set_call_hook(h)
        try:
            t0 = time.perf_counter()
            for _ in range(calls):
                watched("verify", inst, _nothing)
            return (time.perf_counter() - t0) / calls * 1e6
        finally:
            watch.set_call_hook(None)

    bare, hooked = [], []
    meter = Meter("per call, alternating rounds", 2 * rounds * calls, progress, unit="calls")
    for _ in range(rounds):
        bare.append(timed(None))
        hooked.append(timed(hook))
        meter.advance(2 * calls)
    meter.close()
    b, h = statistics.median(bare), statistics.median(hooked)
    return {
        "calls_per_round": calls,
        "rounds": rounds,
        "bare_us": b,
        "with_hook_us": h,
        "overhead_us": h - b,
    }


def per_run(profile_name: str, rounds: int, progress: Callable[[str], object]) -> dict:
    """Seconds for one decision-equality check in this process and in a worker, alternating."""
    profile = PROFILES[profile_name]
    inside, outside = [], []
    with tempfile.TemporaryDirectory() as out:
        impl = load_implementation(EXAMPLE)
        [check] = [c for c in impl_checks(impl) if CHECK in c.name]
        meter = Meter("per run, in process and in a worker", 2 * rounds, progress, unit="runs")
        for r in range(rounds):
            progress(f"  round {r + 1}/{rounds}: in process ...")
            t0 = time.perf_counter()
            [res_in] = run_checks([check], profile, Path(out))
            inside.append(time.perf_counter() - t0)
            progress(f"  round {r + 1}/{rounds}: in a worker ...")
            t0 = time.perf_counter()
            run = supervised.run_impl_checks(EXAMPLE, None, profile, CHECK, Path(out), worker.Limits())
            outside.append(time.perf_counter() - t0)
            meter.advance(2)
            [res_out] = run.results
            if (res_in.verdict, res_in.detail) != (res_out.verdict, res_out.detail):
                raise AssertionError(f"the worker changed the verdict: {res_in.detail!r} vs {res_out.detail!r}")
    meter.close()
    i, o = statistics.median(inside), statistics.median(outside)
    return {
        "profile": profile_name,
        "check": f"impl: {CHECK} on {EXAMPLE}",
        "verdict": res_in.verdict,
        "in_process_seconds": i,
        "in_worker_seconds": o,
        "worker_overhead_seconds": o - i,
    }


PROTOCOL_CASE = 1  # the quick output-law case both protocols run (a tree, K=2, m=1, depth 2)
TARGETS = GATE  # each on CPU and CUDA


def _tv_60s(rate: float, law: dict, cases: int) -> float:
    """The detectable TV per case of a 60-second run at ``rate`` cycles per second: the
    statistical checks' formula (merged bins at that N, alpha split over ``cases``)."""
    n = int(rate * 60)
    p = np.array(sorted(law.values()))
    groups = merge_bins(n * p / p.sum())
    return detectable_tv(n, len(groups) - 1, FAMILY_ALPHA / cases)


def protocols(quick: bool, progress: Callable[[str], object]) -> dict:
    """Cycles per second of the fastpath through each protocol, side by side."""
    from rheo.checks.statistics.batched import device_of, output_counts
    from rheo.integrations.fastpath_protocol import Fastpath, FastpathPerRequest

    cases = output_law_cases("quick")
    case = cases[PROTOCOL_CASE]
    inst = law_instance(case)
    law = sequence_law(inst)
    per_request, batched = Implementation(FastpathPerRequest(), "per request"), Implementation(Fastpath(), "batched")
    n_req, n_bat, rounds = (200, 200_000, 2) if quick else (1_000, 1_000_000, 3)
    continued_outputs(per_request, inst, 20, np.random.default_rng(1))  # warm-up: imports, first torch calls
    output_counts(batched, inst, 20_000, seed=1)
    req, bat = [], []
    meter = Meter("protocols, alternating rounds", rounds * (n_req + n_bat), progress, unit="cycles")
    for r in range(rounds):  # alternating rounds, medians
        progress(f"protocols, round {r + 1}/{rounds}: {n_req} cycles per request ({case['name']}) ...")
        t0 = time.perf_counter()
        continued_outputs(per_request, inst, n_req, np.random.default_rng(r))
        req.append(n_req / (time.perf_counter() - t0))
        meter.advance(n_req)
        progress(f"protocols, round {r + 1}/{rounds}: {n_bat} cycles batched ...")
        t0 = time.perf_counter()
        output_counts(batched, inst, n_bat, seed=r)
        bat.append(n_bat / (time.perf_counter() - t0))
        meter.advance(n_bat)
    meter.close()
    req_rate, bat_rate = statistics.median(req), statistics.median(bat)
    out = {
        "case": case["name"],
        "implementation": "rheo.fastpath through rheo.integrations.fastpath_protocol (FastpathPerRequest, Fastpath)",
        "device": str(device_of(batched)),
        "per_request_cycles": n_req,
        "batched_cycles": n_bat,
        "rounds": rounds,
        "per_request_cycles_per_second": req_rate,
        "batched_cycles_per_second": bat_rate,
        "batched_over_per_request": bat_rate / req_rate,
        "per_request_detectable_tv_60s": _tv_60s(req_rate, law, len(cases)),
        "batched_detectable_tv_60s": _tv_60s(bat_rate, law, len(cases)),
        "batched_cycles_in_60s": int(bat_rate * 60),
    }
    out["meets_targets"] = summary(judge(out, out["device"], TARGETS[1:]))["meets_targets"]
    return out


ADAPTER = "examples.without_replacement:GumbelChain"  # a cheap whole-cycle adapter (torch, tiny tensors)
ADAPTER_CHECK = "output law (whole cycles)"


def _memoised(logits: Callable) -> Callable:
    """paths -> logits, each path's row computed once (a plain loop's tables cost nothing)."""
    rows: dict = {}

    def answer(paths):
        for p in paths:
            if tuple(p) not in rows:
                rows[tuple(p)] = logits([p])[0]
        return np.stack([rows[tuple(p)] for p in paths])

    return answer


def _plain_rate(spec: str, case: dict, cycles: int, threads: int | None) -> float:
    """Cycles per second of the adapter's ``cycle`` in a plain loop on ``case``'s tables
    (precomputed: no protocol, no checking, no continuation) with torch on ``threads``."""
    import torch

    impl = load_implementation(spec)
    inst = law_instance(case)
    draft_logits, target_logits = _memoised(draft_logits_fn(inst)), _memoised(target_logits_fn(inst))
    config, temperature = protocol_config(inst), inst.config.temperature.value
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        for _ in range(20):  # warm-up, and every table row memoised
            impl.obj.cycle(draft_logits, target_logits, config, temperature)
        t0 = time.perf_counter()
        for _ in range(cycles):
            impl.obj.cycle(draft_logits, target_logits, config, temperature)
        return cycles / (time.perf_counter() - t0)
    finally:
        torch.set_num_threads(before)


def adapter_speed(quick: bool, progress: Callable[[str], object], cycles: int | None = None) -> dict:
    """The gate's output-law cycle rate against a plain loop over the same adapter, side by side
    (``cycles`` each; default 2,000 with ``quick``, else 10,000)."""
    import dataclasses

    impl = load_implementation(ADAPTER)
    [(name, case)] = [
        (c["name"], c) for c in output_law_cases("quick") if impl.supports(protocol_config(law_instance(c)))
    ][:1]
    cycles = cycles or (2_000 if quick else 10_000)
    profile = dataclasses.replace(PROFILES["smoke"], impl_cycles=cycles, impl_cycles_given=True)
    out: dict = {"adapter": ADAPTER, "case": name, "cycles": cycles}
    with tempfile.TemporaryDirectory() as folder:
        for threads, key in ((1, "one_thread"), (None, "torch_default_threads")):
            progress(
                f"adapter speed: {cycles} cycles in a plain loop, torch on {threads or 'its own count of'} threads ..."
            )
            out[f"plain_cycles_per_second_{key}"] = _plain_rate(ADAPTER, case, cycles, threads)
            progress(f"adapter speed: the gate's output law on the same case, --threads {threads or 0} ...")
            given = dataclasses.replace(profile, impl_cases_only=True)
            run = supervised.run_impl_checks(
                ADAPTER, [case], given, ADAPTER_CHECK, Path(folder), worker.Limits(threads=threads)
            )
            [res] = run.results
            if res.verdict != "pass":
                raise AssertionError(f"the gate's output law did not pass on {name}: {res.detail}")
            out[f"gate_cycles_per_second_{key}"] = res.data["cycles_per_second"]
    one, plain = out["gate_cycles_per_second_one_thread"], out["plain_cycles_per_second_one_thread"]
    out["plain_over_gate"] = plain / one if one else None
    default = out["gate_cycles_per_second_torch_default_threads"]
    out["gate_one_thread_over_default"] = one / default if one and default else None
    return out


def exact_only(progress: Callable[[str], object] = print, limit: float = 60.0) -> dict:
    """``rheo bench gate --exact-only``: the exact-certification rows alone."""
    rows = run_exact_rows(progress, limit)
    out = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "exact_certification": rows,
        "exact_fast_over_replay": rows["exact_fast_over_replay"],
        "device": "cpu",
    }
    verdicts = judge(out, "cpu", TARGETS)
    out.update(summary(verdicts))
    out["pass"] = passed(verdicts) and rows["same_law"]
    return out


def run_bench_gate(
    quick: bool = False, progress: Callable[[str], object] = print, exact: bool = False, exact_limit: float = 60.0
) -> dict:
    calls, rounds = (50_000, 3) if quick else (200_000, 5)
    progress(f"per call: {rounds} rounds of {calls} watched calls, with and without the worker's hook ...")
    call = per_call(calls, rounds, progress)
    progress("per run: one decision-equality check in this process and in a worker ...")
    run = per_run("smoke" if quick else "quick", 1 if quick else 3, progress)
    out = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "per_call": call,
        "per_run": run,
        "worker_overhead_per_call_us": call["overhead_us"],
        "worker_overhead_per_call_target_us": PER_CALL_TARGET_US,
    }
    if importlib.util.find_spec("torch") is None:
        out["protocols"] = None
        progress("protocols: skipped, torch is not installed")
    else:
        proto = protocols(quick, progress)
        out["protocols"] = proto
        for key in (
            "per_request_cycles_per_second",
            "batched_cycles_per_second",
            "batched_detectable_tv_60s",
            "per_request_detectable_tv_60s",
            "batched_cycles_in_60s",
        ):
            out[key] = proto[key]
        progress("adapter speed: a plain loop against the gate's output law, one adapter ...")
        speed = adapter_speed(quick, progress)
        out["adapter_speed"] = speed
        out["plain_over_gate"] = speed["plain_over_gate"]
    out["device"] = "cpu" if out["protocols"] is None else out["protocols"]["device"]  # where the protocols ran
    same_law = True
    if exact:
        rows = run_exact_rows(progress, exact_limit)
        out["exact_certification"] = rows
        out["exact_fast_over_replay"] = rows["exact_fast_over_replay"]
        same_law = rows["same_law"]
    verdicts = judge(out, out["device"], TARGETS)
    out.update(summary(verdicts))
    out["pass"] = passed(verdicts) and same_law
    return out
