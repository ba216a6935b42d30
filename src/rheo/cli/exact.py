"""``rheo exact``: the exact certificate of one case file (docs/spec.md §5 and §8), as a
readable report or one JSON object."""

from __future__ import annotations

import argparse
import heapq
import json
import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rheo.casefile import MAX_CASE_BYTES, MAX_DIGITS, MAX_NESTING, builtin_examples, case_of, load_case, read_case
from rheo.checks.exact.self_check import self_check
from rheo.checks.gate.pictures import MATPLOTLIB_MISSING, have_matplotlib, write_law_picture
from rheo.cli.common import FORMATTER, add_json_flag, emit, fail, fail_case, one_line, printable, progress
from rheo.progress import PhaseMeters, about, duration, significant
from rheo.reference import CaseError, Deadline, Timeout, certify
from rheo.reference.certify import Report
from rheo.reference.estimate import Estimate, work_estimate
from rheo.reference.numbers import fmt_number
from rheo.reference.theorem3 import child_set_law, per_node_optimum_exact, theorem3_alpha, theorem3_applies

CASE_FORMAT = """\
case file format (docs/spec.md §8) - one JSON object:
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
            "token"), temperature ("1"; exact mode needs 0 or 1/k, k <= 1000),
            draft_top_k (null), verify ("rheo" | "sample_last" | "class_law"), draft_law
            ("sampled" | "dense" | "untempered"), arithmetic ("exact" | "float64"),
            target_top_k, target_top_p, target_min_p, and name / description / expected
            (ignored by the engine)
  probabilities: "3/10", "0.3" or 0.3 (a JSON number is read as the decimal it prints);
  every vector has vocab_size entries summing to 1 (exactly, in exact mode)
"""

DEFAULT_TIMEOUT = 300.0  # seconds; --timeout 0 = no limit
DEFAULT_COUNT_TIMEOUT = 30.0  # seconds; --count-timeout 0 = do not count joint draws


def add_parser(sub: argparse._SubParsersAction) -> None:
    fmt = FORMATTER
    ex = sub.add_parser(
        "exact",
        formatter_class=fmt,
        help="exact cycle law, losslessness and tau of one case",
        description="Enumerate every random tree the sampler can build for CASE.json, verify each\n"
        "exactly, and compare the continued output law with the target law p_T on\n"
        "every sequence of length depth+1 (docs/spec.md §5 and §8).\n\n" + CASE_FORMAT,
        epilog="exit status: 0 lossless, 1 NOT lossless (or the reference self-check failed: its target law\n"
        "differs from an independent one; JSON key self_check), 2 bad input, 3 --timeout reached\n\n"
        f"limits: --timeout {DEFAULT_TIMEOUT:g} s unless given (0 = no limit), checked in every phase:\n"
        "reading, building the laws, enumerating, certifying. A case file holds at most\n"
        f"{MAX_CASE_BYTES // 2**20} MiB of UTF-8 JSON, nested at most {MAX_NESTING} deep, numbers of at most "
        f"{MAX_DIGITS} digits.\n"
        'A gate counterexample file (one with a "case" object) is read as its case.\n'
        "bad input: one line per error of the case file, up to 20 (--json: error, errors).\n\n"
        "progress: every phase longer than about 5 s reports on stderr once a second (done,\n"
        "of how many, the rate, the time left). The work is estimated from the case's shape\n"
        "(joint draws, class-enumerator branches); a second into the enumeration, one line\n"
        "says so when it will not fit in --timeout, which still decides when to stop.\n\n"
        "--json prints one object: lossless, max_abs_deviation, worst_sequence, worst_continued,\n"
        "worst_target, tau, root_acceptance, joint_draws (null if not counted), classes,\n"
        'enumerator, arithmetic, first_token_law, cycle_law ("0 2" -> probability), case, and\n'
        "at depth 1 theorem3 and root_optimum. Exact mode: numbers are rational strings.\n\n"
        "examples:\n"
        "  rheo exact                                       # the built-in docs/spec.md §6 case\n"
        "  rheo exact --example abc-constant                # the paper's ad-hoc proxy breaks it\n"
        "  rheo exact cases/control-sample_last.json --json # a saved counterexample\n"
        "  rheo exact --list-examples",
    )
    ex.add_argument("case", nargs="?", metavar="CASE.json", help='a case file (default: the built-in example "abc")')
    ex.add_argument("--example", metavar="NAME", help="run a built-in example case instead of a file")
    ex.add_argument("--list-examples", action="store_true", help="list the built-in example cases and exit")
    ex.add_argument(
        "--enumerator",
        choices=("classes", "naive"),
        default=None,
        help="equivalence classes (default, fast) or every joint draw (the naive check)",
    )
    ex.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"give up after this long, exit 3 (default {DEFAULT_TIMEOUT:g}; 0 = no limit)",
    )
    ex.add_argument(
        "--count-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="time cap for counting joint draws with the class enumerator (reported as null past it; "
        f"default {DEFAULT_COUNT_TIMEOUT:g}; 0 = do not count; never past --timeout)",
    )
    ex.add_argument(
        "--plot",
        metavar="FILE.png",
        help="also draw a picture into this PNG file: the cycle law continued to length depth+1 against p_T "
        "(the sequences furthest from it, then the likeliest) and the cycle law itself; --json adds its path "
        'as "plot" (needs matplotlib: pip install "rheosampling[notebooks]")',
    )
    add_json_flag(ex)


def flag_problem(args) -> str | None:
    """The first flag that is out of range or would be ignored, as an error line."""
    for flag, value, zero in (
        ("--timeout", args.timeout, "0 for no limit"),
        ("--count-timeout", args.count_timeout, "0 to skip counting"),
    ):
        if value is not None and not (math.isfinite(value) and value >= 0):
            return f"{flag}: must be a number of seconds > 0, or {zero}; got {value:g}"
    if args.list_examples:
        given = {
            "CASE.json": args.case,
            "--example": args.example,
            "--enumerator": args.enumerator,
            "--timeout": args.timeout is not None,
            "--count-timeout": args.count_timeout is not None,
            "--plot": args.plot,
        }
        ignored = [name for name, value in given.items() if value]
        if ignored:
            return f"--list-examples: lists the built-in examples and reads nothing else; drop {', '.join(ignored)}"
    if args.plot and not have_matplotlib():  # said before the work, not after it
        return f"--plot: {MATPLOTLIB_MISSING}"
    if args.case and args.example:
        return "give either CASE.json or --example NAME, not both"
    if args.enumerator == "naive" and args.count_timeout is not None:
        return (
            "--count-timeout: the naive enumerator counts each joint draw as it enumerates it (no separate count "
            "to cap); drop --count-timeout or use --enumerator classes"
        )
    return None


@contextmanager
def exact_digits() -> Iterator[None]:
    """Exact results can be rationals longer than the 4300 digits Python prints by default;
    lift that limit while ``rheo exact`` runs. A case file's own numbers are held to
    ``MAX_DIGITS`` before they are read (rheo.casefile), so no long text is parsed."""
    get, set_ = getattr(sys, "get_int_max_str_digits", None), getattr(sys, "set_int_max_str_digits", None)
    if get is None or set_ is None:  # a Python without the limit
        yield
        return
    before = get()
    set_(0)
    try:
        yield
    finally:
        set_(before)


def cmd_exact(args) -> int:
    problem = flag_problem(args)
    if problem is not None:
        return fail(problem)
    examples = builtin_examples()
    if args.list_examples:
        if args.json:
            emit(json.dumps({name: case.get("description", "") for name, case in examples.items()}))
        else:
            lines = (f"{name:<16} {case.get('description', '')}" for name, case in examples.items())
            emit("\n".join(printable(line) for line in lines))
        return 0
    timeout = DEFAULT_TIMEOUT if args.timeout is None else (args.timeout or None)
    count_timeout = DEFAULT_COUNT_TIMEOUT if args.count_timeout is None else args.count_timeout
    enumerator = args.enumerator or "classes"
    watch = Watch(timeout)
    deadline = Deadline(timeout, progress=progress, every=HEARTBEAT, heartbeat=watch)  # every phase checks it
    with exact_digits():
        try:
            if args.case:
                case, note = case_of(read_case(args.case, deadline))
                source = args.case
                if note is not None:
                    progress(printable(f"rheo exact: {note}"))
            else:
                name = args.example or "abc"
                if name not in examples:
                    return fail(f"--example: no built-in example {name!r}; choose one of {', '.join(examples)}")
                case, source = examples[name], f"built-in example {name}"
            inst = load_case(case, deadline)
            watch.estimate = est = work_estimate(inst, enumerator, deadline)
            if enumerator == "naive":  # its progress: joint draws of this many (the class enumerator's: its share)
                deadline.expect(est.what, est.count)
                if not est.exact:
                    watch.meters.bounds = {est.what}
            report = certify(
                inst,
                enumerator,
                deadline,
                count_draws=count_timeout > 0,
                count_seconds=count_timeout or None,
            )
            watch.meters.close()  # the last phase's closing line, if it reported
            add_single_layer_facts(report)
            checked = self_check(inst)  # the reference's p_T against an independent one
        except CaseError as e:
            return fail_case(e, one_line)
        except Timeout as e:
            return fail(f"--timeout: {e}; raise --timeout (0 = no limit) or shrink the case", 3)
        except ZeroDivisionError:
            if case.get("arithmetic") != "float64":
                raise  # exact laws sum to 1: not an input problem
            return fail(
                f"temperature: in float64, p^(1/T) underflows to 0 for every token of a law at T = "
                f"{one_line(str(case.get('temperature')), 40)}; use a larger T, T = 0 (the argmax) or exact arithmetic"
            )
        if args.plot:  # the picture (rheo.checks.gate.pictures); --json names it as "plot"
            try:
                plotted = write_law_picture(report, args.plot, case.get("name") or source)
            except OSError as e:
                return fail(f"--plot: cannot write {args.plot}: {e.strerror or e}")
            if plotted is None:
                return fail(f"--plot: {MATPLOTLIB_MISSING}")
            report.extras["plot"] = str(plotted)
        if args.json:
            out = report.to_json()
            out["case"] = case.get("name") or source
            out["self_check"] = checked.to_json()
            emit(json.dumps(out))
        else:
            text = render(report, case, source)
            if not checked.passed:
                text = f"{printable(checked.detail())}\n{text}"
            emit(text)
    return 0 if report.lossless and checked.passed else 1


HEARTBEAT = 0.25  # seconds between the deadline's heartbeats (progress lines: at most one a second)
CALIBRATION = 1.0  # seconds of enumeration whose rate decides the "too big" line
MARGIN = 1.5  # the line is said when the time estimated is over MARGIN x --timeout (a first second's rate is rough)


class Watch:
    """The deadline's heartbeat in ``rheo exact``: progress lines on stderr for every phase
    longer than about 5 s (``rheo.progress.PhaseMeters``: fraction done, rate, time left
    where a total is known), and the "too big" line.

    The work is estimated from the case's shape before it starts
    (``rheo.reference.estimate``: joint draws for the naive enumerator, exact for a draft
    table of one full law; branches for the class enumerator, an upper bound); the rate is
    measured over the enumeration's first ``CALIBRATION`` seconds (the class enumerator's
    by the share of its branches explored, which is sharper than its bound; while nothing
    is done, at least that long per unit). If every guess of its second half gives a time
    over ``MARGIN`` times --timeout, one line on stderr says so, then and only then.
    ``--timeout`` still decides when to stop."""

    def __init__(self, timeout: float | None, report=progress, clock=time.perf_counter) -> None:
        self.timeout, self.report, self.clock = timeout, report, clock
        self.meters = PhaseMeters(report, clock=clock)
        self.estimate: Estimate | None = None
        self.guesses: list[tuple[float, str, str]] = []  # (seconds in all, units, rate) at each heartbeat so far
        self.decided = False
        self.warned: str | None = None

    def __call__(self, deadline: Deadline, where: str) -> None:
        self.meters(deadline, where)
        est = self.estimate
        if self.decided or est is None or self.timeout is None or deadline.phase != est.what:
            return
        spent = self.clock() - deadline.started[est.what]
        if spent < CALIBRATION / 2:
            return  # too early to guess anything
        self.guesses.append(self.guess(deadline, est))
        if spent < CALIBRATION:
            return
        self.decided = True
        if min(self.guesses)[0] > MARGIN * self.timeout:  # every guess so far: too long
            seconds, count, rate = self.guesses[-1]  # the latest, from the most measured
            self.warned = (
                f"rheo exact: this case needs {count} {est.what}, about {duration(seconds)} at the measured rate "
                f"({rate}); --timeout is {self.timeout:g} s"
            )
            self.report(self.warned)

    def guess(self, deadline: Deadline, est: Estimate) -> tuple[float, str, str]:
        """(seconds the whole run needs, the units it needs, the rate) at the rate so far."""
        began = deadline.started[est.what]
        spent = max(self.clock() - began, 1e-9)
        done = deadline.counts.get(est.what, 0)
        share = deadline.shares.get(est.what)
        bound = f"{'' if est.exact else 'up to '}{about(est.count)}"
        if share:  # the class enumerator: the share of its branches explored
            count, needed = f"about {about(done / share)}", spent / share
        elif done:
            count, needed = bound, spent * est.count / done
        else:  # not one done yet: at least as long per unit as the first is taking
            count, needed = bound, spent * est.count
        rate = f"{significant(done / spent)} {est.what}/s" if done else f"none done in {spent:.1f} s"
        return (began - deadline.start) + needed, count, rate


MAX_VOCAB_FOR_OPTIMUM = 12  # the exact per-node optimum enumerates 2^n token sets


def add_single_layer_facts(report: Report) -> None:
    """Theorem 3 (depth 1) and the root's per-node optimum, when they apply."""
    inst, ex = report.inst, report.inst.exact
    if theorem3_applies(inst):
        closed = theorem3_alpha(inst)
        enum = report.cycle.root_acceptance()
        agrees = closed == enum if ex else abs(float(closed) - float(enum)) <= 1e-12
        report.extras["theorem3"] = {
            "alpha_closed_form": fmt_number(closed, ex),
            "alpha_enumerated": fmt_number(enum, ex),
            "agrees": agrees,
        }
    if report.cycle.trees and inst.n <= MAX_VOCAB_FOR_OPTIMUM:
        sets = child_set_law(report.cycle.trees)
        report.extras["root_optimum"] = fmt_number(per_node_optimum_exact(inst.target_law(()), sets), ex)


FIRST_TOKENS_SHOWN = 20  # the report's first-token table lists every token up to 32, else the 20 most likely


def render(report: Report, case: dict, source: str) -> str:
    j = report.to_json()
    inst, c = report.inst, report.inst.config
    lines = []
    name = case.get("name") or source
    desc = f" - {case['description']}" if case.get("description") else ""
    lines.append(one_line(f"case: {name}{desc}", 300))
    params = f"policy={c.policy} K={c.K}" + (f" m={c.m}" if c.policy == "rheo" else "")
    params += f" depth={c.depth} budget={c.budget} beam={c.B} T={c.temperature}"
    if c.draft_top_k is not None:
        params += f" draft_top_k={c.draft_top_k}"
    variants = []
    if c.policy == "rheo" and c.proxy.kind != "rheo":
        variants.append(f"proxy={c.proxy.describe()}")
    for key, default in (("tie_break", "slot"), ("verify", "rheo"), ("draft_law", "sampled")):
        if getattr(c, key) != default:
            variants.append(f"{key}={getattr(c, key)}")
    lines.append(f"  {params}  arithmetic={c.arithmetic}" + (f"  [{', '.join(variants)}]" if variants else ""))
    if c.sampling is not None:
        given = c.sampling.to_case()
        spelled = " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in given.items())
        lines.append(one_line(f"  sampling parameters (docs/spec.md §9): {spelled}", 300))
    L = inst.seq_len
    verdict = "LOSSLESS" if j["lossless"] else "NOT LOSSLESS"
    lines.append(
        f"verdict: {verdict}   max |continued - p_T| = {j['max_abs_deviation']} "
        f"over the {inst.n}^{L} sequences of length {L}"
    )
    if not j["lossless"]:
        lines.append(
            f"  worst sequence {j['worst_sequence']}: continued law {j['worst_continued']} "
            f"vs target {j['worst_target']}"
        )
    draws = "not counted (over the time cap)" if j["joint_draws"] is None else j["joint_draws"]
    lines.append(
        f"tau = E|O| = {j['tau']}   root acceptance = {j['root_acceptance']}   "
        f"joint draws = {draws}   classes = {j['classes']}   ({j['enumerator']}, {report.seconds:.3f} s)"
    )
    if "theorem3" in j:
        t = j["theorem3"]
        lines.append(
            f"Theorem 3: closed form alpha = {t['alpha_closed_form']} "
            f"({'agrees with' if t['agrees'] else 'DIFFERS FROM'} the enumeration)"
        )
    if "root_optimum" in j:
        lines.append(
            f"per-node optimum at the root (best lossless acceptance for this child-set law) = {j['root_optimum']}"
        )
    lines.append("first token:   token  cycle law      target p_T")
    target = inst.target_law(())
    tokens = list(range(inst.n))
    if inst.n > 32:
        tokens = heapq.nsmallest(FIRST_TOKENS_SHOWN, range(inst.n), key=lambda t: (-target[t], t))
    for t in tokens:
        lines.append(f"               {t:<6} {str(j['first_token_law'][t]):<14} {fmt_number(target[t], inst.exact)}")
    if len(tokens) < inst.n:
        lines.append(f"               (the {len(tokens)} most likely of {inst.n} tokens; --json lists them all)")
    items = sorted(report.cycle.law.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = items[:12]
    lines.append(f"cycle law ({len(items)} outputs{', most likely 12' if len(items) > 12 else ''}):")
    for o, pr in shown:
        lines.append(f"  {' '.join(map(str, o)):<16} {fmt_number(pr, inst.exact)}")
    return "\n".join(lines)
