"""Each case's own bound and progress in exact certification (``rheo gate --exact-budget``;
docs/gate.md, "How many cycles").

A case is enumerated under a ``CaseClock``: every run of the implementation (a symbolic run,
a concrete evaluation, a handed-uniform call) ticks it, and each enumeration of the case
(the tree law, each tree's walk, the concrete draws) starts a ``part`` (the share of the mass
a line reports is that part's). A tick past the case's deadline raises
``Outgrown``, which the certifier turns into a skipped case that names its size and the runs
done; past the run cap (``MAX_RUNS``) the same. While a case runs longer than the progress
meters' quiet period (``RHEO_PROGRESS_AFTER``, 5 s), a line at most every 10 s says how far it
got: the runs so far, the share of the probability mass enumerated where the enumeration
knows it, and the time left that share implies (in this process: cases run as Ray tasks
report when they end)::

    exact certification, topk K=3 V=3 D=3: 12,000 runs (31%), 410 runs/s, about 1 min left

``size`` says how large a case's enumeration may get, for the refusal and for the notice
up front (``beyond_reach``): an implementation that draws its own tree orders the children
of every node slot it draws, V! / (V - K)! orders each, and in the worst case every slot of
the tree is drawn whether the verifier reaches it or not.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rheo.progress import Meter, about, percent

AFFORDABLE_ORDERS = 20_000  # the tree orders an enumeration surely affords within the quick budget
PROGRESS_EVERY = 10.0  # seconds between a long case's progress lines


class Outgrown(Exception):
    """The case's enumeration passed its deadline (``seconds``) or the run cap (``cap``)."""

    def __init__(
        self, runs: int, seconds: float, share: float | None, cap: int | None = None, reason: str = ""
    ) -> None:
        super().__init__(runs, seconds, share, cap, reason)
        self.runs, self.seconds, self.share, self.cap = runs, seconds, share, cap
        self.reason = reason or "outgrew the exact budget"

    def why(self) -> str:
        done = f"{self.runs:,} runs in {self.seconds:.0f} s"
        if self.share is not None:
            done += f", {percent(self.share)} of its probability mass enumerated"
        if self.cap is not None:
            return f"needed more than the {self.cap:,} runs a case may take ({done})"
        return f"{self.reason} ({done})"


class CaseClock:
    """One case's deadline (``time.time()``; None: none) and progress meter."""

    def __init__(
        self, name: str, deadline: float | None, report: Callable[[str], object] | None, reason: str = ""
    ) -> None:
        self.deadline, self.reason = deadline, reason
        self.began = time.time()
        self.runs = 0
        self.share: float | None = None
        self.meter = Meter(f"exact certification, {name}", None, report, unit="runs", every=PROGRESS_EVERY)

    def part(self) -> None:
        """A new enumeration of the case begins (the tree law, a tree's walk, concrete draws):
        the share of the mass said so far was the last one's."""
        self.share = None

    def tick(self, share: float | None = None, n: int = 1) -> None:
        """``n`` more runs; ``share``: the share of the current enumeration's mass done."""
        before, self.runs = self.runs, self.runs + n
        if share is not None:
            self.share = share
        now = time.time()
        if self.deadline is not None and now > self.deadline:
            raise Outgrown(self.runs, now - self.began, self.share, reason=self.reason)
        if self.runs // 16 != before // 16:
            self.meter.update(self.runs, self.share)

    def close(self) -> None:
        self.meter.close()


_CLOCK: list[CaseClock] = []


@contextmanager
def case_clock(
    name: str, deadline: float | None, report: Callable[[str], object] | None, reason: str = ""
) -> Iterator[CaseClock]:
    """While inside, ``tick`` counts the runs of the case ``name`` against ``deadline``
    (``reason``: what a case stopped there says, by default "outgrew the exact budget")."""
    clock = CaseClock(name, deadline, report, reason)
    _CLOCK.append(clock)
    try:
        yield clock
    finally:
        _CLOCK.pop()
        clock.close()


def part() -> None:
    """A new enumeration of the case under way begins (``CaseClock.part``)."""
    if _CLOCK:
        _CLOCK[-1].part()


def tick(share: float | None = None, n: int = 1) -> None:
    """``n`` more runs of the case under way (a no-op outside ``case_clock``)."""
    if _CLOCK:
        _CLOCK[-1].tick(share, n)


def orders(vocab: int, K: int) -> int:
    """The ordered child sets of one node slot: V! / (V - K)! (K at most V)."""
    return math.perm(vocab, min(K, vocab))


def slots(K: int, depth: int) -> int:
    """The node slots of a full tree of K children per node to ``depth`` that draw children."""
    return sum(K**level for level in range(depth))


def size(case: dict) -> tuple[float, str]:
    """(the orders of a whole tree when every node slot draws its children, the case's size
    in words) for a case dict: its worst case when an implementation draws its own trees."""
    V, K, D = int(case["vocab_size"]), int(case["K"]), int(case["depth"])
    per, n = orders(V, K), slots(K, D)
    digits = n * math.log10(per) if per > 0 else 0.0
    total = math.inf if digits > 300 else float(per**n)
    trees = about(total) if math.isfinite(total) else f"1e{digits:.0f}"
    words = f"V={V}, K={K}, depth {D}: {n} node slot{'s' if n > 1 else ''} drawing children, {per} orders each"
    return total, f"{words} (up to {trees} trees)" if n > 1 else words


def beyond_reach(cases: list[dict]) -> str | None:
    """The notice up front where ``cases`` (what ``supports`` admits) hold trees whose worst
    case the enumeration cannot afford: the largest of them and the largest it can; None
    where every case is affordable or no case draws a tree (K = 1 or depth 1)."""
    sized = [(size(c)[0], c) for c in cases if int(c["K"]) > 1 and int(c["depth"]) > 1]
    big = [(n, c) for n, c in sized if n > AFFORDABLE_ORDERS]
    if not big:
        return None
    worst = max(big, key=lambda x: x[0])[1]
    fits = [(n, c) for n, c in sized if n <= AFFORDABLE_ORDERS]
    largest = f"the largest it surely affords here: {size(max(fits, key=lambda x: x[0])[1])[1]}" if fits else (
        f"none of its trees of depth 2 or more is surely affordable (at most {AFFORDABLE_ORDERS:,} orders)"
    )  # fmt: skip
    return (
        f"supports admits trees the exact enumeration may not afford where the implementation draws every "
        f"node slot's children: {len(big)} case{'s' if len(big) > 1 else ''} up to {size(worst)[1]}; {largest}. "
        "Each case runs under --exact-budget and is skipped by name when it outgrows it"
    )
