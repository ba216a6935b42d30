"""rheo.progress: progress lines for long work (issue 20), on a fake clock (nothing sleeps)."""

from types import SimpleNamespace

from rheo.progress import Meter, PhaseMeters, duration


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def meter(total=100, **kw):
    clock, lines = Clock(), []
    return Meter("work", total, lines.append, unit="steps", clock=clock, **kw), clock, lines


def test_quiet_for_the_first_seconds_then_at_most_once_a_second():
    m, clock, lines = meter()
    for t in (0.0, 1.0, 4.9):
        clock.now = t
        m.update(int(t * 2))
    assert lines == []  # work that ends within quiet_for says nothing
    for t in (5.0, 5.5, 5.99, 6.0, 6.5, 7.1):
        clock.now = t
        m.update(int(t * 2))
    assert len(lines) == 3  # at 5.0, 6.0 and 7.1
    assert lines[0] == "  work: 10/100 steps (10%), 2 steps/s, about 45 s left"
    m.close()
    assert lines[-1] == "  work: done, 14 steps in 7 s (1.97 steps/s)"


def test_short_work_never_reports_even_when_closed():
    m, clock, lines = meter()
    clock.now = 3.0
    m.update(100)
    m.close()
    assert lines == []


def test_silent_without_a_report_callable():
    m = Meter("work", 10, None, clock=Clock())
    m.update(5)
    m.advance(2)
    m.close()
    assert m.done == 7


def test_advance_counts_on_from_the_last_update():
    m, clock, lines = meter(quiet_for=0.0)
    m.advance()
    clock.now = 2.0
    m.advance(3)
    assert m.done == 4 and lines[-1] == "  work: 4/100 steps (4%), 2 steps/s, about 48 s left"


def test_without_a_total_a_rate_and_the_time_so_far():
    m, clock, lines = meter(total=None, quiet_for=0.0)
    clock.now = 4.0
    m.update(1_000_000)
    assert lines == ["  work: 1,000,000 steps, 250,000 steps/s, 4 s so far"]


def test_nothing_done_yet_says_so_and_guesses_nothing():
    m, clock, lines = meter(quiet_for=0.0)
    clock.now = 12.0
    m.update(0)
    assert lines == ["  work: 0/100 steps (0%), none done in 12 s"]


def test_a_told_fraction_and_an_upper_bound_total():
    m, clock, lines = meter(total=None, quiet_for=0.0)
    clock.now = 10.0
    m.update(30, fraction=0.25)  # e.g. the share of a search tree explored
    assert lines == ["  work: 30 steps (25%), 3 steps/s, about 30 s left"]
    b, clock, lines = meter(total=1000, quiet_for=0.0, bound=True)
    clock.now = 10.0
    b.update(250)
    assert lines == ["  work: 250/1,000 steps (25% or more), 25 steps/s, at most 30 s left"]


def test_the_start_can_be_given_on_the_meters_clock():
    clock, lines = Clock(), []
    clock.now = 100.0
    m = Meter("work", 10, lines.append, clock=clock, start=96.0)
    m.update(4)  # 4 s in: quiet
    clock.now = 101.0
    m.update(5)
    assert lines == ["  work: 5/10 (50%), 1 /s, about 5 s left"]


def test_durations_read_as_a_person_says_them():
    assert [duration(s) for s in (0.4, 59, 3000, 4 * 3600, 3 * 86400)] == ["0 s", "59 s", "50 min", "4 h", "3 days"]


def test_phase_meters_follow_a_deadlines_phases():
    """The heartbeat of rheo.reference's Deadline: one Meter per phase, closed when the next begins."""
    clock, lines = Clock(), []
    meters = PhaseMeters(lines.append, clock=clock, bounds={"joint draws"})
    d = SimpleNamespace(phase=None, counts={}, totals={}, shares={}, started={})
    meters(d, "reading")  # no phase named yet: nothing
    d.phase, d.started["joint draws"], d.totals["joint draws"] = "joint draws", 0.0, 1000
    for t in range(1, 9):
        clock.now, d.counts["joint draws"] = float(t), 100 * t
        meters(d, "joint draws")
    assert lines[0] == "  naive enumerator: 500/1,000 joint draws (50% or more), 100 joint draws/s, at most 5 s left"
    assert len(lines) == 4  # at 5, 6, 7 and 8 s
    d.counts["joint draws"] = 850  # its last count, between heartbeats
    d.phase, d.started["sequences compared"] = "sequences compared", 8.5
    clock.now, d.counts["sequences compared"], d.shares["sequences compared"] = 14.5, 600, 0.5
    meters(d, "sequences compared")
    assert lines[4] == "  naive enumerator: done, 850 joint draws in 8 s (100 joint draws/s)"
    assert lines[5] == "  deviation search over V^(D+1): 600 steps (50%), 100 steps/s, about 6 s left"
    meters.close()
    assert lines[6] == "  deviation search over V^(D+1): done, 600 steps in 6 s (100 steps/s)"
