"""What every ``rheo`` command shares: the argument parser's error line, ``--json``, error
lines on stderr (exit 2) and progress on stderr.

Under --json an error also prints one JSON object, ``{"error": "..."}``, on stdout (a usage
error that argparse reports, before the options are read, prints only its stderr line).

Exit status: 0 = done and lossless (or a benchmark that met its checks), 1 = a finding
(NOT lossless, a failed check, a missed benchmark target), 2 = bad input (one line on
stderr naming the field), 3 = gave up at --timeout.
"""

from __future__ import annotations

import argparse
import json
import sys

FORMATTER = argparse.RawDescriptionHelpFormatter


class Parser(argparse.ArgumentParser):
    """Bad usage: one line on stderr, exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_json_flag(parser: argparse.ArgumentParser, dest: str = "json") -> None:
    """Every command takes --json (one JSON object on stdout instead of its table)."""
    parser.add_argument("--json", action="store_true", dest=dest, help="print one JSON object on stdout")


_JSON_ERRORS = False  # set by ``errors_as_json`` from the command's --json


def errors_as_json(on: bool) -> None:
    """Under --json, ``fail`` also prints ``{"error": MESSAGE}`` on stdout."""
    global _JSON_ERRORS
    _JSON_ERRORS = bool(on)


def fail(message: str, code: int = 2) -> int:
    """One error line on stderr (and under --json the JSON object ``{"error": message}`` on
    stdout); returns the exit status (2: bad input, 3: gave up at --timeout)."""
    print(f"rheo: error: {message}", file=sys.stderr)
    if _JSON_ERRORS:
        emit(json.dumps({"error": message}))
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
