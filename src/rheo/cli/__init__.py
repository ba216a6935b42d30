"""The ``rheo`` command: one module per command (``exact``, ``gate``, ``bench``, and the
real-model commands in ``model``), the shared parts in ``common``.

Exit status: 0 = done and lossless (or a benchmark that met its checks), 1 = a finding
(NOT lossless, a failed check, a missed target for the device the benchmark ran on), 2 =
bad input (one line on stderr naming the field; one per error of a case file, up to 20),
3 = gave up at --timeout.

Specification: docs/spec.md §8 (case files, `rheo exact`, exit status).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from rheo import __version__
from rheo.cli import bench, exact, gate, model
from rheo.cli.common import FORMATTER, Parser, add_json_flag, emit, errors_as_json, fail
from rheo.cli.exact import CASE_FORMAT
from rheo.progress import quiet_after

MAIN_HELP = f"""\
rheo: exact certification of RheoSampling speculative decoding.

commands:
  rheo exact [CASE.json]     exact cycle law, losslessness, tau for one case
                             (no argument: the built-in docs/spec.md §6 example)
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
                             (the real-model commands need the hf extra: docs/real-model.md)

every command takes --json (one JSON object on stdout instead of the table).
work longer than about 5 s reports progress on stderr (RHEO_PROGRESS_AFTER=SECONDS: sooner
or later, e.g. 0 for a line from the start).

{CASE_FORMAT}
example:
  rheo exact --example abc-constant      # the paper's ad-hoc proxy: NOT lossless
  rheo exact my_case.json --json
"""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="rheo", description=MAIN_HELP, formatter_class=FORMATTER)
    parser.add_argument("--version", action="version", version=f"rheo {__version__}")
    add_json_flag(parser, "json_top")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    exact.add_parser(sub)
    gate.add_parser(sub)
    bsub = bench.add_parser(sub)
    model.add_parsers(sub, bsub, add_json_flag, FORMATTER)
    return parser


def main(argv=None) -> int:
    code = _main(argv)
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. `rheo exact | head`: the reader left; keep the exit status
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code


def _main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # --json may stand before or after the command name
    args.json = getattr(args, "json", False) or args.json_top or getattr(args, "json_bench", False)
    errors_as_json(args.json)
    try:
        quiet_after()  # RHEO_PROGRESS_AFTER, read by every progress meter: refused here, not mid-run
    except ValueError as e:
        return fail(str(e))
    if args.command == "exact":
        return exact.cmd_exact(args)
    if args.command == "bench":
        return bench.cmd_bench(args)
    if args.command == "gate":
        return gate.cmd_gate(args)
    if args.command in ("generate", "train-draft"):
        return (model.cmd_generate if args.command == "generate" else model.cmd_train_draft)(args, emit)
    if args.json:
        print(
            json.dumps(
                {
                    "version": __version__,
                    "commands": [
                        "exact",
                        "gate",
                        "bench exact",
                        "bench fastpath",
                        "bench tau",
                        "generate",
                        "train-draft",
                    ],
                    "help": "rheo COMMAND --help",
                }
            )
        )
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
