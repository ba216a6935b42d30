"""The ``rheo`` command.

Exit status: 0 = done and lossless (or a benchmark that met its checks), 1 = done and NOT
lossless (or a benchmark check failed), 2 = bad input (one line on stderr naming the
field), 3 = gave up at --timeout.
"""
from __future__ import annotations

import argparse
import json
import sys

from rheo import __version__

CASE_FORMAT = """\
case file format (SPEC section 8) - one JSON object:
  {
    "vocab_size": 3,
    "target": {"*": ["1/5", "1/2", "3/10"]},        p(. | prefix); keys are prefixes
    "draft":  {"*": ["1/2", "3/10", "1/5"],          q(. | prefix): ids joined by ",",
               "0": ["1/3", "1/3", "1/3"]},         "" = root, "*" = any other prefix
    "policy": "rheo", "K": 3, "m": 1, "depth": 1, "budget": 2
  }
  required: vocab_size, target, draft, policy ("rheo" | "topk"), K, depth, budget,
            and m (0 <= m <= K-1) when policy is rheo
  optional: beam (default K), proxy ("rheo" | "self" | {"constant": "1/4"} |
            {"per_prefix": {"": "1/2", "*": "1/3"}}), epsilon ("0"), tie_break ("slot" |
            "token"), temperature ("1"; exact mode needs 0 or 1/k), draft_top_k (null),
            verify ("rheo" | "sample_last" | "class_law"), draft_law ("sampled" | "dense" |
            "untempered"), arithmetic ("exact" | "float64"), target_top_k, target_top_p,
            target_min_p, and name / description / expected (ignored by the engine)
  probabilities: "3/10", "0.3" or 0.3 (a JSON number is read as the decimal it prints);
  every vector has vocab_size entries summing to 1 (exactly, in exact mode)
"""

MAIN_HELP = f"""\
rheo: exact certification of RheoSampling speculative decoding.

commands:
  rheo exact [CASE.json]     exact cycle law, losslessness, tau for one case
                             (no argument: the built-in SPEC section 6 example)
  rheo gate                  the lossless-regression gate: exact matrix, negative
                             controls (each must be caught), fastpath checks
  rheo gate --impl MOD:OBJ   check another implementation (tree builder and/or
                             verifier) against the reference
  rheo bench exact           class enumerator vs naive enumerator, and how far the
                             class enumerator certifies within 60 s
  rheo bench fastpath        the torch fastpath: Rheo vs Top-K cycle, sparse vs dense
                             draft law, batched vs naive verifier (needs torch)
  rheo generate              speculative decoding on a real model (SmolLM2-135M-Instruct
                             + the trained draft head), streamed; tau and tokens/s
  rheo train-draft           train that draft head on this CPU (pinned corpus)
  rheo bench tau [--quick]   tau of Top-K vs Rheo m=0..3 on HumanEval prompts
                             (the real-model commands need the hf extra: see README)

every command takes --json (one JSON object on stdout instead of the table).

{CASE_FORMAT}
example:
  rheo exact --example abc-constant      # the paper's ad-hoc proxy: NOT lossless
  rheo exact my_case.json --json
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # bad usage: one line, status 2
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_json_flag(parser: argparse.ArgumentParser, dest: str = "json") -> None:
    """Every command takes --json (one JSON object on stdout instead of its table)."""
    parser.add_argument("--json", action="store_true", dest=dest, help="print one JSON object on stdout")


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="rheo", description=MAIN_HELP, formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"rheo {__version__}")
    add_json_flag(parser, "json_top")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    ex = sub.add_parser(
        "exact", formatter_class=fmt,
        help="exact cycle law, losslessness and tau of one case",
        description="Enumerate every random tree the sampler can build for CASE.json, verify each\n"
                    "exactly, and compare the continued output law with the target law p_T on\n"
                    "every sequence of length depth+1 (SPEC sections 5 and 8).\n\n" + CASE_FORMAT,
        epilog="exit status: 0 lossless, 1 NOT lossless, 2 bad input, 3 --timeout reached\n\n"
               "--json prints one object: lossless, max_abs_deviation, worst_sequence, worst_continued,\n"
               "worst_target, tau, root_acceptance, joint_draws (null if not counted), classes,\n"
               "enumerator, arithmetic, first_token_law, cycle_law (\"0 2\" -> probability), case, and\n"
               "at depth 1 theorem3 and root_optimum. Exact mode: numbers are rational strings.\n\n"
               "examples:\n"
               "  rheo exact                                       # the built-in SPEC section 6 case\n"
               "  rheo exact --example abc-constant                # the paper's ad-hoc proxy breaks it\n"
               "  rheo exact cases/control-sample_last.json --json # a saved counterexample\n"
               "  rheo exact --list-examples")
    ex.add_argument("case", nargs="?", metavar="CASE.json", help="a case file (default: the built-in example \"abc\")")
    ex.add_argument("--example", metavar="NAME", help="run a built-in example case instead of a file")
    ex.add_argument("--list-examples", action="store_true", help="list the built-in example cases and exit")
    ex.add_argument("--enumerator", choices=("classes", "naive"), default="classes",
                    help="equivalence classes (default, fast) or every joint draw (the naive check)")
    ex.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help="give up after this long (exit 3)")
    ex.add_argument("--count-timeout", type=float, default=30.0, metavar="SECONDS",
                    help="time cap for counting joint draws (reported as null past it; default 30)")
    add_json_flag(ex)

    gate = sub.add_parser(
        "gate", formatter_class=fmt,
        help="the lossless-regression gate (or, with --impl, the checks of another implementation)",
        description="Without --impl, the gate for this engine:\n"
                    "  exact matrix      every lossless family (rheo m=0,1,2, topk, epsilon, target filters; T 0,\n"
                    "                    1/2, 1; sparse on/off; budgets 1..full; beams) certified on generated\n"
                    "                    instances: the deviation must be exactly 0\n"
                    "  negative controls every wrong-on-purpose variant (SPEC 2-4) and the paper's constant\n"
                    "                    proxy must be CAUGHT: its saved counterexample replayed exactly, and a\n"
                    "                    fresh Hypothesis search must find and shrink a new one (written to --out)\n"
                    "  fastpath          decision equality with the reference, cycle law (chi-square), and a\n"
                    "                    calibration that must fire on planted bugs (skipped without torch)\n\n"
                    "With --impl MODULE:OBJECT, the checks of that implementation: decision equality\n"
                    "against the reference on shrinkable generated cases, and its cycle law. The\n"
                    "protocol (build_tree and/or verify) is in `python -c \"import rheo.harness as h;\n"
                    "help(h)\"` and the README section \"Is my implementation lossless?\".\n\n"
                    "profiles: quick (default; under 3 minutes on 2 cores) and deep (fresh random\n"
                    "searches, 10x examples, more exact configurations, 5x samples, and losslessness\n"
                    "end to end on the real model SmolLM2-135M, which needs the hf extra).\n"
                    "Progress goes to stderr, one line per check.",
        epilog="exit status: 0 every check passed (skips allowed unless --strict), 1 a check failed,\n"
               "2 bad input\n\n"
               "examples:\n"
               "  rheo gate                                              # quick profile, table\n"
               "  rheo gate --profile deep --junit gate.xml              # for a CI system\n"
               "  rheo gate --impl examples.loop_impl:LoopImplementation # passes\n"
               "  rheo gate --impl examples.buggy_impl:TokenTieBreak     # fails, counterexample saved\n"
               "  rheo gate --impl examples.buggy_impl:TokenTieBreak --replay rheo-gate/examples-buggy-impl-tokentiebreak-decision-equality.json")
    gate.add_argument("--profile", choices=("quick", "deep"), default="quick", help="quick (default) or deep")
    gate.add_argument("--impl", metavar="MODULE:OBJECT", help="check this implementation instead of the engine")
    gate.add_argument("--replay", metavar="FILE", help="with --impl: rerun one saved decision-equality counterexample")
    gate.add_argument("--only", metavar="TEXT", help="run only the checks whose name contains TEXT")
    gate.add_argument("--out", metavar="DIR", default="rheo-gate", help="where counterexample files go (default rheo-gate/)")
    gate.add_argument("--junit", metavar="PATH", help="also write JUnit XML here")
    gate.add_argument("--strict", action="store_true", help="a skipped check (e.g. no torch) fails the gate")
    add_json_flag(gate)

    bench = sub.add_parser("bench", formatter_class=fmt, help="benchmarks (ratios measured side by side in one run)",
                           description="Benchmarks. Speed targets live here, never in timed tests.")
    add_json_flag(bench, "json_bench")
    bsub = bench.add_subparsers(dest="bench_command", parser_class=_Parser)
    be = bsub.add_parser(
        "exact", formatter_class=fmt,
        help="class enumerator vs naive enumerator; largest vocabulary and depth certified in the limit",
        description="1. n=6, K=3, m=1, depth=3, budget=6, beam=3 (generated tables, seed 0): both\n"
                    "   enumerators, same exact answer required, speed ratio (target >= 20x).\n"
                    "2. the largest vocabulary (K=3, m=1, depth=3, budget=6) and the largest depth\n"
                    "   (n=4, K=3, m=1, budget=2*depth) the class enumerator certifies (cycle law +\n"
                    "   deviation over V^(D+1)) within --limit seconds.\n"
                    "Progress goes to stderr; takes a few minutes at the default limit.")
    be.add_argument("--limit", type=float, default=60.0, metavar="SECONDS", help="time limit per certification (default 60)")
    be.add_argument("--skip-search", action="store_true", help="only the side-by-side comparison")
    add_json_flag(be)
    bf = bsub.add_parser(
        "fastpath", formatter_class=fmt,
        help="the torch fastpath: Rheo/Top-K cycle, sparse/dense draft law, batched/naive verifier",
        description="Times the fastpath with model forwards excluded (logits come from a table model;\n"
                    "the time spent answering forwards is subtracted). Default shape: V=128256, K=10,\n"
                    "depth=8, budget=60, m=1, draft_top_k=128, batch sizes 1, 16 and 64. Ratios:\n"
                    "  rheo_over_topk          Rheo cycle / Top-K cycle           (target <= 1.25)\n"
                    "  sparse_over_dense       tree with top-128 / tree drawing Y from all V\n"
                    "                          (Gumbel-max or multinomial, the faster) (target <= 0.25)\n"
                    "  fast_over_naive_verify  naive loop verifier / batched verifier at batch 64\n"
                    "                          (target >= 10)\n"
                    "Each ratio is measured side by side in one run (A B A B ..., medians). The\n"
                    "worst batch size is reported at the top level. Progress goes to stderr.\n"
                    "exit status: 0 all targets met, 1 a target missed or the verifiers disagree",
        epilog="examples:\n  rheo bench fastpath --json\n  rheo bench fastpath --quick\n"
               "  rheo bench fastpath --device cuda --json")
    bf.add_argument("--quick", action="store_true", help="batch sizes 1 and 16, naive verifier at 16, fewer repeats")
    bf.add_argument("--device", default="cpu", help="torch device (default cpu)")
    bf.add_argument("--vocab", type=int, default=128256, metavar="V", help="vocabulary size (default 128256)")
    bf.add_argument("--repeats", type=int, default=None, metavar="N", help="timed runs per variant (default 5, quick 2)")
    add_json_flag(bf)
    from rheo.cli_model import add_parsers
    add_parsers(sub, bsub, add_json_flag, fmt)
    return parser


def _fail(message: str, code: int = 2) -> int:
    print(f"rheo: error: {message}", file=sys.stderr)
    return code


def emit(text: str) -> None:
    """Print to stdout; a reader that went away (`| head`) is not an error."""
    try:
        print(text)
    except BrokenPipeError:
        pass


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cmd_exact(args) -> int:
    from rheo.casefile import builtin_examples, load_case, read_case
    from rheo.reference import CaseError, Deadline, Timeout, certify
    from rheo.report import add_single_layer_facts, render

    examples = builtin_examples()
    if args.list_examples:
        if args.json:
            emit(json.dumps({name: case.get("description", "") for name, case in examples.items()}))
        else:
            emit("\n".join(f"{name:<16} {case.get('description', '')}" for name, case in examples.items()))
        return 0
    if args.case and args.example:
        return _fail("give either CASE.json or --example NAME, not both")
    try:
        if args.case:
            case, source = read_case(args.case), args.case
        else:
            name = args.example or "abc"
            if name not in examples:
                return _fail(f"--example: no built-in example {name!r}; choose one of {', '.join(examples)}")
            case, source = examples[name], f"built-in example {name}"
        inst = load_case(case)
        deadline = Deadline(args.timeout, progress=_progress)
        report = certify(inst, args.enumerator, deadline, count_seconds=args.count_timeout)
        add_single_layer_facts(report)
    except CaseError as e:
        return _fail(str(e))
    except Timeout as e:
        return _fail(f"--timeout: {e}; raise --timeout or shrink the case", 3)
    if args.json:
        out = report.to_json()
        out["case"] = case.get("name") or source
        emit(json.dumps(out))
    else:
        emit(render(report, case, source))
    return 0 if report.lossless else 1


def cmd_gate(args) -> int:
    from pathlib import Path

    from rheo.gate import PROFILES, gate_checks, impl_checks, junit_xml, render, run_checks, summary
    impl = None
    if args.replay and not args.impl:
        return _fail("--replay: give the implementation too (--impl MODULE:OBJECT)")
    if args.impl:
        from rheo.harness import ImplLoadError, load_implementation, replay
        try:
            impl = load_implementation(args.impl)
        except ImplLoadError as e:
            return _fail(str(e))
        if args.replay:
            if not Path(args.replay).is_file():
                return _fail(f"--replay: no such file {args.replay!r}")
            try:
                cmp = replay(impl, args.replay)
            except (KeyError, ValueError) as e:
                return _fail(f"--replay: {args.replay} is not a decision-equality counterexample file ({e})")
            out = {"status": cmp.check.status, "detail": cmp.check.detail, "reference": cmp.reference,
                   "implementation": cmp.implementation}
            emit(json.dumps(out) if args.json else f"{cmp.check.status}: {cmp.check.detail or 'same decisions'}")
            return 1 if cmp.check.status == "differs" else 0
    profile = PROFILES[args.profile]
    checks = impl_checks(impl) if impl else gate_checks(profile)
    if args.only:
        checks = [c for c in checks if args.only.lower() in c.name.lower()]
        if not checks:
            return _fail(f"--only: no check name contains {args.only!r} (see the table of a full run)")
    results = run_checks(checks, profile, Path(args.out), progress=_progress)
    s = summary(results)
    if args.junit:
        Path(args.junit).write_text(junit_xml(results))
    failed = s["fail"] > 0 or (args.strict and s["skip"] > 0)
    if args.json:
        emit(json.dumps({"passed": not failed, "profile": args.profile, "implementation": args.impl,
                         "summary": s, "checks": [r.to_json() for r in results]}))
    else:
        head = f"rheo gate, profile {args.profile}" + (f", implementation {args.impl} ({impl.provides()})" if impl else "")
        emit(render(results, args.profile, head))
    return 1 if failed else 0


def cmd_bench(args) -> int:
    if args.bench_command == "exact":
        from rheo.bench_exact import run_bench_exact
        return run_bench_exact(limit=args.limit, skip_search=args.skip_search, as_json=args.json, progress=_progress)
    if args.bench_command == "fastpath":
        return cmd_bench_fastpath(args)
    if args.bench_command == "tau":
        from rheo.cli_model import cmd_bench_tau
        return cmd_bench_tau(args, emit)
    return _fail("bench: choose a benchmark: `rheo bench exact`, `rheo bench fastpath` or `rheo bench tau` "
                 "(see rheo bench --help)")


def cmd_bench_fastpath(args) -> int:
    try:
        import torch
    except ImportError:
        return _fail("bench fastpath needs torch: pip install \"rheosampling[torch]\" (or torch==2.13.0 here)")
    from rheo.bench_fastpath import bench_fastpath, render
    if args.vocab < 2:
        return _fail(f"--vocab: must be an integer >= 2, got {args.vocab}")
    if args.repeats is not None and args.repeats < 1:
        return _fail(f"--repeats: must be an integer >= 1, got {args.repeats}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        return _fail(f"--device: {args.device} asked for, but torch sees no CUDA device; use --device cpu")
    try:
        torch.empty(0, device=args.device)
    except (RuntimeError, ValueError) as e:
        return _fail(f"--device: {args.device!r} is not a usable torch device ({e})")
    repeats = args.repeats or (2 if args.quick else 5)
    batches, naive = ((1, 16), 16) if args.quick else ((1, 16, 64), 64)
    out = bench_fastpath(batches=batches, vocab=args.vocab, repeats=repeats, naive_batch=naive,
                         device=args.device, quiet=False)
    emit(json.dumps(out) if args.json else render(out))
    ok = all(out["meets_targets"].values()) and out["verify"]["outputs_equal_float64"]
    return 0 if ok else 1


def main(argv=None) -> int:
    code = _main(argv)
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. `rheo exact | head`: the reader left; keep the exit status
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code


def _main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # --json may stand before or after the command name
    args.json = getattr(args, "json", False) or args.json_top or getattr(args, "json_bench", False)
    if args.command == "exact":
        return cmd_exact(args)
    if args.command == "bench":
        return cmd_bench(args)
    if args.command == "gate":
        return cmd_gate(args)
    if args.command in ("generate", "train-draft"):
        from rheo import cli_model
        return (cli_model.cmd_generate if args.command == "generate" else cli_model.cmd_train_draft)(args, emit)
    if args.json:
        print(json.dumps({"version": __version__, "commands": ["exact", "gate", "bench exact", "bench fastpath",
                                                                  "bench tau", "generate", "train-draft"],
                          "help": "rheo COMMAND --help"}))
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
