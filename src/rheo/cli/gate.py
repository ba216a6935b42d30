"""``rheo gate``: the lossless-regression gate, or with ``--impl`` the checks of another
implementation (``rheo.checks.gate``).

Specification: docs/spec.md §5, §7 (what the gate checks).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import os
from pathlib import Path

from rheo.casefile import read_case
from rheo.checks import parallel
from rheo.checks.cases.matrix import read_case_dir
from rheo.checks.engines import EngineMissing, driver_of, engine_checks
from rheo.checks.gate.checklist import gate_checks, only_note, only_rule, select_only
from rheo.checks.gate.report import junit_xml, render
from rheo.checks.gate.run import gate_verdict, run_checks, summary
from rheo.checks.gate.supervised import run_impl_checks, run_replay
from rheo.checks.outcome import PROFILES, QUICK_PREFIX_CYCLES
from rheo.checks.protocol.worker import (
    DEFAULT_CALL_TIMEOUT,
    BadReplay,
    Limits,
    LoadFailed,
    NothingMatched,
)
from rheo.checks.statistics.sizing import MIN_CYCLES, PILOT_CYCLES
from rheo.cli.common import FORMATTER, add_json_flag, emit, fail, fail_case, one_line, progress
from rheo.reference import CaseError


def add_parser(sub: argparse._SubParsersAction) -> None:
    fmt = FORMATTER
    gate = sub.add_parser(
        "gate",
        formatter_class=fmt,
        help="the lossless-regression gate (or, with --impl, the checks of another implementation)",
        description="Without --impl, the gate for this engine:\n"
        "  exact matrix      every lossless family (rheo m=0,1,2, topk, epsilon, target filters; T 0,\n"
        "                    1/2, 1; sparse on/off; budgets 1..full; beams) certified on generated\n"
        "                    instances: the deviation must be exactly 0\n"
        "  negative controls every wrong-on-purpose variant (docs/spec.md §2-§4) and the paper's constant\n"
        "                    proxy must be CAUGHT: its saved counterexample replayed exactly, and a\n"
        "                    fresh Hypothesis search must find and shrink a new one (written to --out)\n"
        "  fastpath          decision equality with the reference, cycle law (chi-square), and a\n"
        "                    calibration that must fire on planted bugs (skipped without torch)\n\n"
        "With --impl MODULE:OBJECT (or path/to/file.py:OBJECT, from any directory), the checks of\n"
        "that implementation (how to write one: docs/adapters.md, the protocol on one page):\n"
        "  decision equality same decisions as the reference on shrinkable generated cases (it\n"
        "                    shows sameness, not losslessness; skipped for follows_uniforms = False)\n"
        "  exact certification\n"
        "                    losslessness, exactly: every random choice it makes (the handed\n"
        "                    uniforms, or its own torch / numpy / random draws) enumerated on the\n"
        "                    small cases of the case matrix, then a Hypothesis search that shrinks\n"
        "                    a lossy case; SKIP (with the call) when its randomness cannot be followed\n"
        "  output law        losslessness: its outputs, continued by exact target sampling to\n"
        "                    length D+1, against p_T on V^(D+1) (chi-square, detectable TV per\n"
        "                    case; against its own sampler_law if it declares one); --cases adds yours\n"
        "  output law, beyond exact reach\n"
        "                    the same on cases too large for that (V up to 1,024, depth up to 6,\n"
        "                    budgets up to 60): the first token's law and the next token's at\n"
        "                    frequent prefixes, each a chi-square with its own detectable TV\n"
        "  cycle law         only with implements_spec = True: its cycle law equals the reference's\n"
        "  output law, batched / large vocabulary, batched\n"
        "                    with build_tree_batch / verify_batch (torch tensors, on its device):\n"
        "                    the output law at 1,000,000 cycles per case, and V = 32,000 first and\n"
        "                    second tokens\n"
        'The protocol (build_tree and/or verify; or cycle for whole cycles) is in `python -c "import\n'
        'rheo.checks.protocol as p; help(p)"`, the batched one in rheo.checks.statistics.batched, and docs/gate.md,\n'
        '"Checking another implementation".\n\n'
        "profiles: quick (default; the engine's own gate in under 3 minutes on 2 cores; with --impl\n"
        "as long as its exact certification (at most --exact-budget, 300 s, past its cheapest case) and its\n"
        "cycles take: 20,000 per output-law case and 4,000 per large case, see --time-budget) and deep (fresh random\n"
        "searches, 10x examples, more exact configurations, 5x samples, and losslessness\n"
        "end to end on the real model SmolLM2-135M, which needs the hf extra); smoke (toy\n"
        "sizes, every check in seconds: for testing rheo itself, not evidence).\n"
        "Progress goes to stderr, one line per check.",
        epilog="exit status: 0 every check passed (skips allowed unless --strict, but not every check\n"
        "skipped), 1 a check failed or nothing was checked, 2 bad input (with --json also a JSON\n"
        'object {"error": ...} on stdout)\n\n'
        "examples:\n"
        "  rheo gate                                              # quick profile, table\n"
        "  rheo gate --profile deep --junit gate.xml              # for a CI system\n"
        "  rheo gate --impl examples.loop_impl:LoopImplementation # passes\n"
        "  rheo gate --engine transformers --method assisted --family llama  # an engine end to end\n"
        "  rheo gate --impl examples.buggy_impl:TokenTieBreak     # fails, counterexample saved\n"
        "  rheo gate --impl path/to/my_engine.py:Engine --cases my_cases/ --cycles 50000\n"
        "  rheo gate --impl examples.loop_impl:LoopImplementation --only 'output law' --tv 0.05\n"
        "  rheo gate --impl path/to/my_engine.py:Engine --time-budget 120  # ~2 min per output-law check\n"
        "  rheo gate --impl examples.buggy_impl:TokenTieBreak \\\n"
        "      --replay rheo-gate/examples-buggy-impl-tokentiebreak-decision-equality.json",
    )
    gate.add_argument(
        "--profile",
        choices=tuple(PROFILES),
        default=None,
        help="quick (default), deep, or smoke (toy sizes that run every check in seconds: for "
        "testing rheo itself, not evidence)",
    )
    gate.add_argument("--impl", metavar="MODULE:OBJECT", help="check this implementation instead of the engine")
    gate.add_argument(
        "--replay",
        metavar="FILE",
        help="with --impl: rerun one saved counterexample (decision equality: the same cycle; exact "
        "certification: the same case)",
    )
    gate.add_argument(
        "--cases",
        metavar="DIR",
        help="with --impl: add the case files DIR/*.json (docs/spec.md §8) to exact certification and the "
        "output-law check",
    )
    gate.add_argument(
        "--cases-only",
        action="store_true",
        help="with --cases: exact certification and the output-law check on those cases alone (no drawn cases, "
        "no Hypothesis search), for quick iteration on the cases you care about",
    )
    gate.add_argument(
        "--cycles",
        metavar="N",
        type=int,
        help="with --impl: cycles per case of the statistical checks (default: the profile's; quick 20000, "
        f"{QUICK_PREFIX_CYCLES} beyond exact reach, 1000000 through the batched protocol); or size them with "
        "--tv / --time-budget",
    )
    gate.add_argument(
        "--tv",
        metavar="D",
        type=float,
        help="with --impl: size each case of the output-law checks (the output law and the one beyond exact "
        "reach) to detect a total-variation distance of D from the judged law with power 0.99: the fewest "
        "cycles whose chi-square, at its alpha, rejects every law at TV >= D that often (D in (0, 1); halving "
        "D takes about 4x the cycles). Each case reports the TV it reached",
    )
    gate.add_argument(
        "--time-budget",
        metavar="SECONDS",
        type=float,
        help="with --impl: give each output-law check at most SECONDS (each case its share of what is left, its "
        f"pilot included): a pilot growing from {MIN_CYCLES} to {PILOT_CYCLES} cycles measures the rate, then as many "
        f"cycles as the rest affords (never fewer than {MIN_CYCLES} a case). With --tv, "
        "the smaller count of the two (the report says whether D was reached). --timeout still bounds the run",
    )
    gate.add_argument(
        "--exact-budget",
        metavar="SECONDS",
        type=float,
        help="with --impl: exact certification certifies its cheapest case (and your --cases) always, then starts "
        "the others, cheapest first, only while SECONDS last (default: the profile's; quick 300, smoke 60, deep "
        "no limit); the cases not reached are named in the report, and the coverage counts only the cases certified",
    )
    gate.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="run the exact-matrix instances, the exact-certification cases and the statistical shards as Ray "
        "tasks on the cluster at ADDRESS (none or 'local': a local Ray instance); the verdicts are those of a "
        "serial run (each shard has its own seed). Needs pip install 'rheosampling[ray]'",
    )
    gate.add_argument(
        "--only",
        metavar="TEXT",
        help="run only the checks TEXT names (case aside), by the first of these rules that names any: (1) a "
        "check's name, its part before ' (', or that part without 'impl: ' ('output law' is the output law alone, "
        "not the one beyond exact reach nor the batched one; 'exact certification'); (2) the short forms 'exact' "
        "(exact certification) and 'beyond exact reach'; (3) the leading words of names, a group ('control', "
        "'fastpath', 'decision'; without --impl 'exact' is the exact matrix); (4) else, as before, every check "
        'whose name contains TEXT, with a line on stderr saying which (--json: its "only" key says what ran '
        "and by which rule). Matching none exits 2, naming the checks",
    )
    gate.add_argument(
        "--out", metavar="DIR", default="rheo-gate", help="where counterexample files go (default rheo-gate/)"
    )
    gate.add_argument("--junit", metavar="PATH", help="also write JUnit XML here")
    gate.add_argument("--strict", action="store_true", help="a skipped check (e.g. no torch) fails the gate")
    gate.add_argument(
        "--call-timeout",
        metavar="SECONDS",
        type=float,
        help=f"with --impl: the longest one call into the implementation may run (default {DEFAULT_CALL_TIMEOUT:g}); "
        "past it the worker is killed and the running check fails, naming the call and the case",
    )
    gate.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=float,
        help="with --impl: the longest the whole run may take (default: no limit); the checks not finished fail",
    )
    gate.add_argument(
        "--memory-limit",
        metavar="MIB",
        type=int,
        help="with --impl: the worker's address-space limit in MiB (resource.RLIMIT_AS; default: none; torch alone "
        "maps a few GiB)",
    )
    gate.add_argument(
        "--threads",
        metavar="N",
        type=int,
        help="with --impl: the threads of the implementation's numeric libraries in its worker (torch, OpenMP, MKL, "
        "OpenBLAS; default 1: a statistical check makes many calls on tiny tensors, where a thread pool costs a "
        "wake-up per op and, on a loaded machine, a wait for a core; 0: the libraries' own default). An "
        "OMP_NUM_THREADS (etc.) you set is kept",
    )
    gate.add_argument(
        "--engine",
        metavar="NAME",
        help="judge an engine's own speculative generation end to end on tiny real models built here "
        "(docs/engines.md): transformers, vllm (in the .ci/engines venv), mlx (mlx-lm) or llama_cpp "
        "(llama-cpp-python, built by .ci/engines). One check per method and "
        "layer family: the exact law of its tokens where its draws can be followed, T = 0 against greedy decoding, "
        "every logits row the "
        "verifier consumed against a teacher-forced forward, and a seeded statistical run (10,000 "
        "generations in the quick profile), each against the engine without speculation",
    )
    gate.add_argument(
        "--method",
        metavar="LIST",
        help="with --engine: the methods to judge, comma-separated (transformers: assisted, prompt_lookup, usd; vllm: "
        "ngram, draft_model, draft_probabilistic, eagle; mlx: speculative; llama_cpp: prompt_lookup; "
        "default all)",
    )
    gate.add_argument(
        "--family",
        metavar="LIST",
        help="with --engine: the layer families, comma-separated (llama, gqa, sliding, moe, hybrid; mlx: llama, gqa, "
        "sliding; llama_cpp: llama, gqa; default all)",
    )
    add_json_flag(gate)


def _unwritable(out: str | None, junit: str | None) -> str | None:
    """Why --out or --junit cannot be written, checked before any check runs (None: fine)."""
    if out is not None:
        path = Path(out)
        if path.exists() and not path.is_dir():
            return f"--out: {out} is a file; give a folder for the counterexample files"
        parent = next((p for p in [path, *path.parents] if p.exists()), Path("."))
        if not os.access(parent, os.W_OK):
            return f"--out: cannot create or write {out} ({parent} is not writable)"
    if junit is not None:
        path = Path(junit)
        if path.is_dir():
            return f"--junit: {junit} is a folder; give a file path, e.g. {Path(junit) / 'gate.xml'}"
        if not path.parent.is_dir():
            return f"--junit: the folder {path.parent} does not exist; create it or give another path"
        if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
            return f"--junit: {junit} is not writable"
    return None


def _positive(name: str, value: float | None) -> str | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        unit = "MiB" if name == "memory-limit" else "seconds"
        return f"--{name}: must be a positive, finite number of {unit}, got {value}"
    return None


def _sizing_problem(args) -> str | None:
    """Why --tv / --time-budget cannot be used as given (None: fine)."""
    if args.tv is not None and not (math.isfinite(args.tv) and 0 < args.tv < 1):
        return f"--tv: must be a total-variation distance strictly between 0 and 1 (e.g. 0.05), got {args.tv}"
    problem = _positive("time-budget", args.time_budget)
    if problem:
        return problem
    if args.cycles is not None and (args.tv is not None or args.time_budget is not None):
        return "--cycles fixes the cycles per case; --tv and --time-budget size them instead: give one or the other"
    return None


def cmd_gate(args) -> int:
    if args.engine is not None or args.method is not None or args.family is not None:
        return _engine_gate(args)
    for flag in (
        "replay", "cases", "cycles", "tv", "time_budget", "exact_budget", "call_timeout", "timeout", "memory_limit",
        "threads",
    ):  # fmt: skip
        if getattr(args, flag) is not None and args.impl is None:
            return fail(f"--{flag.replace('_', '-')}: give the implementation too (--impl MODULE:OBJECT)")
    if args.replay is not None and (
        args.junit
        or args.only
        or args.profile
        or args.strict
        or args.cases
        or args.cases_only
        or args.cycles
        or args.ray
        or args.tv is not None
        or args.time_budget is not None
        or args.exact_budget is not None
    ):
        return fail(
            "--replay reruns one saved counterexample: --profile, --only, --junit, --strict, --cases, --cycles, "
            "--tv, --time-budget, --exact-budget and --ray do not apply to it"
        )
    if args.cases_only and args.cases is None:
        return fail("--cases-only: give the cases too (--cases DIR)")
    args.profile = args.profile or "quick"
    for name in ("call-timeout", "timeout", "memory-limit", "exact-budget"):
        problem = _positive(name, getattr(args, name.replace("-", "_")))
        if problem:
            return fail(problem)
    problem = _unwritable(args.out, args.junit)
    if problem:
        return fail(problem)
    if args.cycles is not None and args.cycles < 1:
        return fail(f"--cycles: must be a positive integer, got {args.cycles}")
    problem = _sizing_problem(args)
    if problem:
        return fail(problem)
    if args.impl is not None and (":" not in args.impl or not all(args.impl.rsplit(":", 1))):
        return fail(
            f"--impl: expected MODULE:OBJECT or path/to/file.py:OBJECT "
            f"(e.g. examples.loop_impl:LoopImplementation), got {args.impl!r}"
        )
    module = (args.impl or "").rsplit(":", 1)[0]
    if args.impl is not None and not module.endswith(".py") and ("/" in module or module.startswith(".")):
        return fail(
            f"--impl: {module} is neither a dotted module name nor a .py file; give MODULE:OBJECT or "
            "path/to/file.py:OBJECT"
        )
    extra_cases = None
    if args.cases is not None:
        try:
            extra_cases = read_case_dir(args.cases)
        except CaseError as e:
            return fail_case(e)
    if args.threads is not None and args.threads < 0:
        return fail(
            f"--threads: must be 0 (the libraries' own default) or a positive number of threads, got {args.threads}"
        )
    threads = 1 if args.threads is None else (args.threads or None)
    limits = Limits(args.call_timeout or DEFAULT_CALL_TIMEOUT, args.timeout, args.memory_limit, threads)
    if args.ray is not None:
        if importlib.util.find_spec("ray") is None:
            return fail("--ray: Ray is not installed; pip install 'rheosampling[ray]' (or pip install ray)")
        try:
            executor = parallel.RayTasks(args.ray)
        except Exception as e:  # a wrong address, a cluster that is down: bad input
            return fail(f"--ray {args.ray}: cannot connect ({type(e).__name__}: {' '.join(str(e).split())[:300]})")
        parallel.use(executor)
        args.ray_address = executor.address  # the implementation's worker joins the same cluster
        progress(f"rheo gate: the pieces of work run on {executor.description}")
    try:
        return _run_gate(args, limits, extra_cases)
    finally:
        if args.ray is not None:
            parallel.current().close()
            parallel.use(parallel.Serial())


def _run_gate(args, limits: Limits, extra_cases) -> int:
    profile = PROFILES[args.profile]
    if args.cycles is not None:
        profile = dataclasses.replace(
            profile,
            impl_cycles=args.cycles,
            impl_batched_cycles=args.cycles,
            impl_prefix_cycles=args.cycles,
            impl_cycles_given=True,
        )
    profile = dataclasses.replace(profile, impl_tv=args.tv, impl_time_budget=args.time_budget)
    if args.exact_budget is not None:
        profile = dataclasses.replace(profile, impl_exact_budget=args.exact_budget)
    if args.cases_only:
        profile = dataclasses.replace(profile, impl_cases_only=True)
    provides = ""
    if args.impl is not None:
        if args.replay:
            return _replay(args, limits)
        try:
            run = run_impl_checks(
                args.impl,
                extra_cases,
                profile,
                args.only,
                Path(args.out),
                limits,
                progress,
                ray=getattr(args, "ray_address", None),
            )
        except LoadFailed as e:
            return fail(str(e))
        except NothingMatched as e:
            return fail(f"--only: no check name contains {args.only!r}; the checks here are: {e}")
        results, provides = run.results, run.provides
    else:
        all_checks = gate_checks(profile)
        checks = all_checks
        if args.only:
            matched, how = select_only([c.name for c in all_checks], args.only)
            if not matched:
                names = "; ".join(c.name for c in all_checks)
                return fail(f"--only: no check name contains {args.only!r}; the checks here are: {names}")
            if how == "substring":
                progress(only_note(args.only, matched))
            checks = [c for c in all_checks if c.name in matched]
        results = run_checks(checks, profile, Path(args.out), progress=progress)
    s = summary(results)
    if args.junit:
        Path(args.junit).write_text(junit_xml(results, strict=args.strict), encoding="utf-8")
    passed, why = gate_verdict(results, args.strict)
    if args.json:
        emit(
            json.dumps(
                {
                    "passed": passed,
                    "reason": why,
                    "profile": args.profile,
                    "implementation": args.impl,
                    "summary": s,
                    "checks": [r.to_json() for r in results],
                    **({"only": _only_json(args.only, [r.name for r in results])} if args.only else {}),
                }
            )
        )
    else:
        head = f"rheo gate, profile {args.profile}" + (
            f", implementation {args.impl} ({provides})" if args.impl else ""
        )
        emit(render(results, args.profile, head, args.strict))
    return 0 if passed else 1


ENGINE_ONLY = ("impl", "replay", "cases", "cycles", "tv", "time_budget", "exact_budget", "call_timeout", "timeout",
               "memory_limit", "threads", "ray")  # fmt: skip


def _engine_gate(args) -> int:
    """``rheo gate --engine NAME``: the engine's checks (rheo.checks.engines)."""
    if args.engine is None:
        return fail("--method, --family: give the engine too (--engine transformers)")
    given = [f"--{f.replace('_', '-')}" for f in ENGINE_ONLY if getattr(args, f, None) not in (None, False)]
    if args.cases_only:
        given.append("--cases-only")
    if given:
        return fail(f"--engine: {', '.join(given)} do not apply to an engine's end-to-end checks")
    problem = _unwritable(args.out, args.junit)
    if problem:
        return fail(problem)
    args.profile = args.profile or "quick"
    try:
        driver = driver_of(args.engine)
    except ValueError as e:
        return fail(str(e))
    except EngineMissing as e:
        return fail(f"--engine {args.engine}: {e}")
    chosen = {}
    for flag, allowed in (("method", driver.methods), ("family", driver.families)):
        value = getattr(args, flag)
        names = [v.strip() for v in value.split(",") if v.strip()] if value else list(allowed)
        unknown = [n for n in names if n not in allowed]
        if unknown or not names:
            return fail(f"--{flag}: expected names from {', '.join(allowed)} (comma-separated), got {value!r}")
        chosen[flag] = names
    profile = PROFILES[args.profile]
    checks = engine_checks(args.engine, profile, chosen["method"], chosen["family"], driver)
    if args.only:
        matched, how = select_only([c.name for c in checks], args.only)
        if not matched:
            return fail(f"--only: no check name contains {args.only!r}; the checks here are: "
                        + "; ".join(c.name for c in checks))  # fmt: skip
        checks = [c for c in checks if c.name in matched]
    results = run_checks(checks, profile, Path(args.out), progress=progress)
    if args.junit:
        Path(args.junit).write_text(junit_xml(results, strict=args.strict), encoding="utf-8")
    passed, why = gate_verdict(results, args.strict)
    if args.json:
        emit(json.dumps({"passed": passed, "reason": why, "profile": args.profile, "engine": args.engine,
                         "summary": summary(results), "checks": [r.to_json() for r in results]}))  # fmt: skip
    else:
        emit(render(results, args.profile, f"rheo gate, profile {args.profile}, engine {args.engine}", args.strict))
    return 0 if passed else 1


def _only_json(text: str, matched: list[str]) -> dict:
    """The --json ``only`` key: the checks --only ran and the rule that named them (the
    worker selected them for --impl; the first name says by which rule: ``only_rule``)."""
    return {"text": text, "matched": matched, "how": only_rule(text, matched[0]) if matched else None}


def _replay(args, limits: Limits) -> int:
    """--replay: check the file here, run the implementation on it in a supervised worker."""
    if not Path(args.replay).exists():
        return fail(f"--replay: no such file {args.replay!r}")
    try:
        saved = read_case(args.replay)  # capped in size and nesting, like a case file
    except CaseError as e:
        return fail(f"--replay: {args.replay} is not a JSON counterexample file ({one_line(e.message)})")
    replayable = ("exact certification", "decision equality", "exact certification, whole generations")
    if not isinstance(saved, dict) or saved.get("check") not in replayable:
        return fail(
            f"--replay: {args.replay} is not a decision-equality or exact-certification counterexample file "
            '(its "check" key says which)'
        )
    try:
        out, text, code = run_replay(args.impl, args.replay, limits)
    except LoadFailed as e:
        return fail(str(e))
    except BadReplay as e:
        return fail(f"--replay: {args.replay}: {e}")
    emit(json.dumps(out) if args.json else text)
    return code
