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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


class Timeout(RuntimeError):
    """A computation ran past its deadline."""


class Deadline:
    """Raises Timeout once ``seconds`` have passed (None: never); optional progress callback."""

    def __init__(
        self, seconds: float | None = None, progress: Callable[[str], object] | None = None, every: float = 2.0
    ) -> None:
        self.start = time.perf_counter()
        self.seconds = seconds
        self.progress = progress
        self.every = every
        self._next = self.start + every

    def check(self, count: int | None, what: str = "joint draws") -> None:
        """Raise Timeout if the time is up (``count`` ``what`` done so far, for the message;
        ``count`` None: ``what`` says where)."""
        now = time.perf_counter()
        done = what if count is None else f"{count} {what}"
        if self.seconds is not None and now - self.start > self.seconds:
            raise Timeout(f"gave up after {self.seconds:g} s ({done})")
        if self.progress is not None and now >= self._next:
            self._next = now + self.every
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
