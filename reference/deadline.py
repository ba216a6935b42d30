"""A time limit for a computation (``rheo exact --timeout``, docs/spec.md §8).

``Deadline.check`` raises ``Timeout`` once the time is up. Every loop whose length grows
with the case (the vocabulary, the number of branches or classes, the depth) checks it
after each step: the enumerators once per branch, the loops over a law's ``vocab_size``
entries through ``paced``, the recursions once per call (``stack.run_stack``). A run
therefore stops within one step of work after its deadline, in every phase: reading the
tables, building the laws of a node, enumerating, verifying, certifying.

>>> list(paced(range(3), None))  # no deadline: the items themselves, nothing checked
[0, 1, 2]
>>> list(paced(range(3), Deadline(60), "counting to three"))
[0, 1, 2]

Progress: a ``Deadline`` also knows which *phase* of the work is under way. The code
doing the work names it when it starts (``begin("joint draws")``) and counts it in its
checks (``check(count, "joint draws")``, with the share of the phase done where it can
tell it); whoever made the deadline may give the count it expects (``expect``, an estimate
or a bound). ``progress(line)`` hears "  ... 12 joint draws, 2.0 s" every ``every``
seconds; a ``heartbeat(deadline, where)`` is called instead, at the same pace, to read
the phase itself (``phase``, ``counts``, ``totals``, ``shares``, ``started``):

>>> d = Deadline(None)
>>> d.expect("joint draws", 8)
>>> d.begin("joint draws")
>>> for i in range(1, 4):
...     d.check(i, "joint draws")
>>> d.phase, d.counts["joint draws"], d.totals["joint draws"]
('joint draws', 3, 8)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


class Timeout(RuntimeError):
    """A computation ran past its deadline."""


class Deadline:
    """Raises Timeout once ``seconds`` have passed (None: never); optional progress: a
    ``progress`` line or a ``heartbeat`` every ``every`` seconds (see the module's text)."""

    def __init__(
        self,
        seconds: float | None = None,
        progress: Callable[[str], object] | None = None,
        every: float = 2.0,
        heartbeat: Callable[[Deadline, str], object] | None = None,
    ) -> None:
        self.start = time.perf_counter()
        self.seconds = seconds
        self.progress = progress
        self.every = every
        self.heartbeat = heartbeat
        self._next = self.start + every
        self.phase: str | None = None  # the work under way (``begin``)
        self.counts: dict[str, int] = {}  # the latest count checked, per phase
        self.totals: dict[str, float] = {}  # the count expected, per phase (exact, or from ``expect``)
        self.shares: dict[str, float] = {}  # the share of a phase done, where the work can tell
        self.started: dict[str, float] = {}  # when each phase began (time.perf_counter)

    def begin(self, what: str, total: float | None = None) -> None:
        """The work counted in ``what`` starts now (``total``: its count, if known exactly;
        else a count given to ``expect``, if any, stands)."""
        self.phase = what
        self.started[what] = time.perf_counter()
        self.counts[what] = 0
        self.shares.pop(what, None)
        if total is not None:
            self.totals[what] = total

    def expect(self, what: str, total: float) -> None:
        """The count of ``what`` expected (an estimate or a bound), for progress lines."""
        self.totals[what] = total

    def check(self, count: int | None, what: str = "joint draws", share: float | None = None) -> None:
        """Raise Timeout if the time is up (``count`` ``what`` done so far, for the message
        and progress; ``count`` None: ``what`` says where; ``share``: the share of the
        phase ``what`` done)."""
        now = time.perf_counter()
        if count is not None:
            self.counts[what] = count
            if share is not None:
                self.shares[what] = share
        if self.seconds is not None and now - self.start > self.seconds:
            done = what if count is None else f"{count} {what}"
            raise Timeout(f"gave up after {self.seconds:g} s ({done})")
        if now >= self._next and (self.progress is not None or self.heartbeat is not None):
            self._next = now + self.every
            if self.heartbeat is not None:
                self.heartbeat(self, what)
            elif self.progress is not None:
                done = what if count is None else f"{count} {what}"
                self.progress(f"  ... {done}, {now - self.start:.1f} s")

    def remaining(self) -> float | None:
        """Seconds left (never below 0), None without a limit."""
        if self.seconds is None:
            return None
        return max(0.0, self.seconds - (time.perf_counter() - self.start))

    def expired(self) -> bool:
        return self.seconds is not None and time.perf_counter() - self.start > self.seconds


def paced(items: Iterable[T], deadline: Deadline | None, what: str = "in a loop over a law's entries") -> Iterable[T]:
    """``items``, with ``deadline`` checked after each one (a clock read: about 0.1 us, a
    tenth of one exact addition); ``what`` says where, in the Timeout message."""
    if deadline is None:
        return items
    return _paced(items, deadline, what)


def _paced(items: Iterable[T], deadline: Deadline, what: str) -> Iterator[T]:
    for x in items:
        yield x
        deadline.check(None, what)
