"""What every ``rheo`` command shares: the argument parser's error line, ``--json``, error
lines on stderr (exit 2) and progress on stderr.

Exit status: 0 = done and lossless (or a benchmark that met its checks), 1 = a finding
(NOT lossless, a failed check, a missed benchmark target), 2 = bad input (one line on
stderr naming the field), 3 = gave up at --timeout.
"""

from __future__ import annotations

import argparse
import sys

FORMATTER = argparse.RawDescriptionHelpFormatter


class Parser(argparse.ArgumentParser):
    """Bad usage: one line on stderr, exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_json_flag(parser: argparse.ArgumentParser, dest: str = "json") -> None:
    """Every command takes --json (one JSON object on stdout instead of its table)."""
    parser.add_argument("--json", action="store_true", dest=dest, help="print one JSON object on stdout")


def fail(message: str, code: int = 2) -> int:
    """One error line on stderr; returns the exit status (2: bad input)."""
    print(f"rheo: error: {message}", file=sys.stderr)
    return code


def emit(text: str) -> None:
    """Print to stdout; a reader that went away (`| head`) is not an error."""
    try:
        print(text)
    except BrokenPipeError:
        pass


def progress(msg: str) -> None:
    """A progress line on stderr (stdout stays for the result)."""
    print(msg, file=sys.stderr, flush=True)
