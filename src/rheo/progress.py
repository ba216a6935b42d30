"""Progress lines for long work (``rheo exact``, the benchmarks): ``Meter``.

A ``Meter`` is told how much is done (``update``, ``advance``) and, once the work has run
``quiet_for`` seconds, reports at most once every ``every`` seconds a line with the
fraction done (when the total is known), the rate and the estimated time left. Work that
ends sooner says nothing. ``report`` is any callable taking one str (the CLI's writes to
stderr, so that stdout stays one JSON object under ``--json``); None is silent. The clock
is injectable, so the worked example runs without sleeping:

>>> now = [0.0]
>>> lines = []
>>> m = Meter("output law, case 3/6", 1_000_000, lines.append, unit="cycles", clock=lambda: now[0])
>>> m.update(50_000)  # 0 s in: quiet
>>> now[0] = 30.3
>>> m.update(412_000)
>>> now[0] = 30.8
>>> m.update(420_000)  # half a second after the last line: quiet
>>> now[0] = 74.0
>>> m.update(1_000_000)
>>> m.close()
>>> print("\\n".join(lines))
  output law, case 3/6: 412,000/1,000,000 cycles (41%), 13,600 cycles/s, about 43 s left
  output law, case 3/6: 1,000,000/1,000,000 cycles (100%), 13,500 cycles/s, about 0 s left
  output law, case 3/6: done, 1,000,000 cycles in 74 s (13,500 cycles/s)

The quiet period defaults to 5 s; the environment variable ``RHEO_PROGRESS_AFTER`` (seconds,
e.g. 0 for a line from the first update on) sets it for every meter of a run, the gate's
worker processes included (``quiet_after``).

``PhaseMeters`` turns the heartbeat of ``rheo.reference``'s ``Deadline`` into one Meter per
phase the reference names (reading, enumerating, verifying, the deviation search).

This module imports nothing of the project's (``rheo.reference``'s Deadline is read by
its attributes), so every room may use it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

Report = Callable[[str], object] | None

QUIET_FOR = 5.0  # seconds of work before the first line, unless RHEO_PROGRESS_AFTER says otherwise


def quiet_after() -> float:
    """The quiet period before a meter's first line: ``RHEO_PROGRESS_AFTER`` (seconds, >= 0)
    or 5. A value that is no such number is refused with its name and the fix.

    >>> os.environ["RHEO_PROGRESS_AFTER"] = "0.5"; quiet_after()
    0.5
    >>> del os.environ["RHEO_PROGRESS_AFTER"]; quiet_after()
    5.0
    """
    text = os.environ.get("RHEO_PROGRESS_AFTER")
    if text is None:
        return QUIET_FOR
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"RHEO_PROGRESS_AFTER: expected seconds >= 0 (e.g. 0 or 2.5), got {text!r}; unset it for 5")
    return value


def count_text(x: float) -> str:
    """A count for a progress line: with thousands separators, or as 3.1e9 past a million
    million.

    >>> count_text(412000), count_text(3.1e9), count_text(2.5e21), count_text(0.5)
    ('412,000', '3,100,000,000', '2.5e21', '0.5')
    """
    if x >= 1e12:
        mantissa, exponent = f"{x:.1e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    if x == int(x):
        return f"{int(x):,}"
    return significant(x)


def about(x: float) -> str:
    """A large count roughly, for an estimate: 3.1e9; below a million, in full.

    >>> about(3.1e9), about(412_000), about(1.6e21)
    ('3.1e9', '412,000', '1.6e21')
    """
    if x < 1e6:
        return count_text(x)
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def significant(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits, with thousands separators.

    >>> significant(13597.0), significant(1.2345), significant(0.012345), significant(0)
    ('13,600', '1.23', '0.0123', '0')
    """
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    if abs(x) >= 1e15:
        return count_text(x)
    decimals = digits - 1 - math.floor(math.log10(abs(x)))
    text = f"{round(x, decimals):,.{max(0, decimals)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def duration(seconds: float) -> str:
    """A time span for a person: "43 s", "7 min", "4.2 h", "12 days", "3.1e13 years".

    >>> duration(43.2), duration(420), duration(15_000), duration(1e6), duration(1e21)
    ('43 s', '7 min', '4.2 h', '12 days', '3.2e13 years')
    """
    if not math.isfinite(seconds):
        return "forever"
    if seconds < 100:
        return f"{seconds:.0f} s"
    if seconds < 100 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{significant(seconds / 3600, 2)} h"
    if seconds < 2 * 365 * 86400:
        return f"{seconds / 86400:.0f} days"
    years = seconds / (365.25 * 86400)
    return f"{count_text(years) if years >= 1e12 else significant(years, 2)} years"


def percent(fraction: float) -> str:
    """41%, 0.3%, <0.1%."""
    pct = 100 * fraction
    if pct >= 1 or pct == 0:
        return f"{math.floor(pct)}%"
    return f"{pct:.1f}%" if pct >= 0.1 else "<0.1%"


class Meter:
    """Progress of one piece of work: ``what`` (e.g. "output law, case 3/6") with ``total``
    ``unit``s to do (None: not known).

    ``report(line)`` is called only after ``quiet_for`` seconds (default ``quiet_after()``)
    have passed since the work began (``start``, by default when the Meter was made), and
    then at most once every ``every`` seconds, from ``update``; ``close`` adds a closing line if any was
    reported. ``bound``: ``total`` is an upper bound, so the fraction is a lower bound and
    the time left an upper bound (the line says "at most"). ``clock`` (default
    ``time.monotonic``) tells the time in seconds; ``start`` is on that clock.
    """

    def __init__(
        self,
        what: str,
        total: float | None,
        report: Report,
        *,
        unit: str = "",
        quiet_for: float | None = None,
        every: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        start: float | None = None,
        bound: bool = False,
    ) -> None:
        self.what, self.total, self.report, self.unit = what, total, report, unit
        self.quiet_for = quiet_after() if quiet_for is None else quiet_for
        self.every, self.clock, self.bound = every, clock, bound
        self.start = clock() if start is None else start
        self.done: float = 0
        self.fraction: float | None = None
        self.reported = 0  # lines reported so far
        self._last: float | None = None

    def update(self, done: float, fraction: float | None = None) -> None:
        """``done`` units are done; ``fraction``: the share of the work done, where the
        caller knows it better than done/total (e.g. the share of a search tree)."""
        self.done = done
        self.fraction = fraction
        if self.report is None:
            return
        now = self.clock()
        if now - self.start < self.quiet_for or (self._last is not None and now - self._last < self.every):
            return
        self._last = now
        self.reported += 1
        self.report(self.line(now))

    def advance(self, n: float = 1) -> None:
        """``n`` more units are done."""
        self.update(self.done + n)

    def close(self, at: float | None = None) -> None:
        """The work is over (``at``: when, on the clock; default now): a closing line
        (done, how long, the rate) if any line was reported, else nothing."""
        if self.report is None or not self.reported:
            return
        now = self.clock() if at is None else at
        elapsed = max(now - self.start, 1e-9)
        self.reported += 1
        self.report(
            f"  {self.what}: done, {self._amount(self.done)} in {duration(elapsed)} "
            f"({significant(self.done / elapsed)} {self._per})"
        )

    @property
    def _per(self) -> str:
        return f"{self.unit}/s" if self.unit else "/s"

    def _amount(self, x: float, total: float | None = None) -> str:
        text = count_text(x) if total is None else f"{count_text(x)}/{count_text(total)}"
        return f"{text} {self.unit}" if self.unit else text

    def share(self) -> float | None:
        """The fraction done: as told (``update``'s ``fraction``) or done/total; None if
        not known."""
        if self.fraction is not None:
            return min(max(self.fraction, 0.0), 1.0)
        if self.total is not None and self.total > 0 and self.done <= self.total:
            return self.done / self.total
        return None

    def line(self, now: float | None = None) -> str:
        """The progress line as of ``now`` (default: the clock's time)."""
        now = self.clock() if now is None else now
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        share = self.share()
        known_total = self.total is not None and self.fraction is None and share is not None
        amount = self._amount(self.done, self.total if known_total else None)
        if share is not None:
            amount += f" ({percent(share)}{' or more' if self.bound else ''})"
        if self.done == 0:
            return f"  {self.what}: {amount}, none done in {duration(elapsed)}"
        text = f"  {self.what}: {amount}, {significant(rate)} {self._per}"
        if share is not None and share > 0:
            left = elapsed * (1 - share) / share
            text += f", {'at most' if self.bound else 'about'} {duration(left)} left"
        else:
            text += f", {duration(elapsed)} so far"
        return text


# the phases rheo.reference's Deadline names (Deadline.begin): what each is, in what units
PHASES = {
    "numbers read": ("reading the case file", "numbers"),
    "table entries read": ("reading the tables", "entries"),
    "joint draws": ("naive enumerator", "joint draws"),
    "class-enumerator branches": ("class enumerator", "branches"),
    "classes verified": ("verifying the classes", "classes"),
    "joint-draw counting branches": ("counting joint draws", "branches"),
    "sequences compared": ("deviation search over V^(D+1)", "steps"),
}


class PhaseMeters:
    """A ``heartbeat`` for ``rheo.reference.deadline.Deadline``: one ``Meter`` per phase.

    The deadline calls ``meters(deadline, where)`` every few tenths of a second; this reads
    the phase under way (``deadline.phase``, named by ``Deadline.begin``), its count
    (``deadline.counts``), its expected total (``deadline.totals``; ``bounds`` names the
    phases whose total is an upper bound), its share done where the reference can tell
    (``deadline.shares``) and when it began (``deadline.started``), and feeds that phase's
    Meter (what and unit from ``PHASES``, ``prefix`` before each). A phase that ends is
    closed when the next one is seen, the last by ``close``.
    """

    def __init__(
        self,
        report: Report,
        *,
        prefix: str = "",
        quiet_for: float | None = None,
        every: float = 1.0,
        bounds: frozenset[str] | set[str] = frozenset(),
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.report, self.prefix, self.quiet_for, self.every = report, prefix, quiet_for, every
        self.bounds, self.clock = bounds, clock
        self.meters: dict[tuple[int, str], Meter] = {}
        self.current: Meter | None = None
        self.phase = ""  # the current Meter's phase

    def __call__(self, deadline: Any, where: str) -> None:
        phase = deadline.phase
        if phase is None:
            return
        key = (id(deadline), phase)
        meter = self.meters.get(key)
        if meter is None:
            what, unit = PHASES.get(phase, (phase, ""))
            total = deadline.totals.get(phase)
            meter = Meter(
                self.prefix + what,
                total,
                self.report,
                unit=unit,
                quiet_for=self.quiet_for,
                every=self.every,
                clock=self.clock,
                start=deadline.started.get(phase),
                bound=total is not None and phase in self.bounds,
            )
            self.meters[key] = meter
        if meter is not self.current:
            self.close(deadline, at=deadline.started.get(phase))
            self.current, self.phase = meter, phase
        meter.update(deadline.counts.get(phase, 0), deadline.shares.get(phase))

    def close(self, deadline: Any = None, at: float | None = None) -> None:
        """Close the phase under way (its closing line, if it reported any), with its last
        count on ``deadline`` if given, ended ``at`` (default now)."""
        if self.current is not None:
            if deadline is not None:
                self.current.done = deadline.counts.get(self.phase, self.current.done)
            self.current.close(at)
            self.current = None
