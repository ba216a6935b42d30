"""What every ``rheo`` command shares: the argument parser's error line, ``--json``, error
lines on stderr (exit 2) and progress on stderr.

Under --json an error also prints one JSON object, ``{"error": "..."}``, on stdout (a usage
error that argparse reports, before the options are read, prints only its stderr line).
Bad input read from a case file (a ``CaseError``) can hold several independent errors:
each gets its own stderr line (at most ``rheo.casefile.MAX_ERRORS``), and the JSON object
is ``{"error": FIRST, "errors": [FIRST, ...]}`` (``fail_case``).

Exit status: 0 = done and lossless (or a benchmark that met its checks), 1 = a finding
(NOT lossless, a failed check, a missed benchmark target for the device it ran on), 2 =
bad input (one line on stderr naming the field; one per error of a case file), 3 = gave
up at --timeout.

Text that comes from the user (a case's name or description, a key, a path) can hold
control characters; ``printable`` escapes them, and every error line goes through it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import unicodedata
from collections.abc import Callable

from rheo.reference import CaseError

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


_ESCAPED = {"Cc", "Cf", "Cs", "Zl", "Zp"}  # controls, format (bidi) marks, lone surrogates, line separators


def printable(text: str) -> str:
    r"""``text`` with control characters (ANSI escapes, NUL, newlines, bidi marks, lone
    surrogates) written as Python escapes, so that it prints as one inert line.

    >>> printable("red \x1b[31m\x00 ok\n")
    'red \\x1b[31m\\x00 ok\\n'
    """
    if text.isprintable():
        return text
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in _ESCAPED else c for c in text)


_LONG_NUMBER = re.compile(r"\d{40,}")
_LONG_IDS = re.compile(r"(?:\d+,){24,}\d+")


def one_line(text: str, limit: int = 400) -> str:
    """``text`` as one short terminal line: control characters escaped (``printable``),
    digit runs of 40 or more shown by their first digits and their length, long lists of
    token ids by their ends and their length, and the middle of what is still longer than
    ``limit`` left out.

    >>> one_line("sums to " + "7" * 5000 + "/3")
    'sums to 777777777777... (5000 digits)/3'
    """
    total = len(text)
    if total > 100_000:  # escape and scan at most this much (numbers keep their exact length up to 50,000 digits)
        text = f"{text[:50_000]} ... {text[-50_000:]}"
    text = printable(text)
    text = _LONG_NUMBER.sub(lambda m: f"{m.group()[:12]}... ({len(m.group())} digits)", text)
    text = _LONG_IDS.sub(lambda m: _ends_of(m.group()), text)
    if len(text) > limit:
        keep = limit - 40
        text = f"{text[: keep * 2 // 3]} ... ({max(total, len(text))} characters) ... {text[-(keep // 3) :]}"
    return text


def _ends_of(ids: str) -> str:
    parts = ids.split(",")
    return f"{','.join(parts[:6])},...,{','.join(parts[-3:])} ({len(parts)} ids)"


def _error_text(message: str) -> str:
    if len(message) > 100_000:  # escape what can be shown, not megabytes
        message = f"{message[:50_000]} ... ({len(message)} characters) ... {message[-50_000:]}"
    return printable(message)


def fail(message: str, code: int = 2) -> int:
    """One error line on stderr (and under --json the JSON object ``{"error": message}`` on
    stdout); returns the exit status (2: bad input, 3: gave up at --timeout). Control
    characters in the message are escaped (``printable``)."""
    message = _error_text(message)
    print(f"rheo: error: {message}", file=sys.stderr)
    if _JSON_ERRORS:
        emit(json.dumps({"error": message}))
    return code


def fail_case(err: CaseError, shorten: Callable[[str], str] = str, code: int = 2) -> int:
    """Bad input from a case file: one error line per error ``err`` carries (``err.errors``:
    every independent problem found, the first being what a single error says), and under
    --json ``{"error": first, "errors": [every one]}``; ``shorten`` writes each as a line
    (``one_line``). Returns the exit status."""
    messages = [_error_text(shorten(str(e))) for e in err.errors]
    for message in messages:
        print(f"rheo: error: {message}", file=sys.stderr)
    if _JSON_ERRORS:
        emit(json.dumps({"error": messages[0], "errors": messages}))
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
