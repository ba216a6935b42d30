"""reference/deadline.py: the time left, expiry, expected counts and progress lines
(issue 24: mutation-testing survivors; the rest is covered through ``rheo exact``)."""

import time

import pytest

from rheo.reference.deadline import Deadline, Timeout, paced

from .deadlines import CountingDeadline


def test_no_limit_never_expires_and_has_no_time_left():
    d = Deadline(None)
    assert d.remaining() is None and d.expired() is False
    d.check(5, "joint draws")  # never raises
    assert d.counts == {"joint draws": 5}


def test_time_left_counts_down_and_stops_at_zero():
    d = Deadline(60)
    left = d.remaining()
    assert left is not None and 59 < left <= 60 and not d.expired()
    past = Deadline(0.001)
    time.sleep(0.01)
    assert past.remaining() == 0.0 and past.expired() is True
    with pytest.raises(Timeout, match=r"gave up after 0.001 s \(7 class-enumerator branches\)"):
        past.check(7, "class-enumerator branches")
    with pytest.raises(Timeout, match=r"gave up after 0.001 s \(reading the tables\)$"):
        past.check(None, "reading the tables")
    with pytest.raises(Timeout, match=r"\(in a loop over a law's entries\)"):
        list(paced([1, 2], past))


def test_expected_counts_stand_until_a_phase_gives_its_own():
    d = Deadline(None)
    d.expect("joint draws", 8)
    d.begin("joint draws")
    assert d.totals == {"joint draws": 8} and d.counts == {"joint draws": 0} and d.phase == "joint draws"
    d.check(3, "joint draws", share=0.5)
    assert d.shares == {"joint draws": 0.5}
    d.begin("joint draws", total=5)
    assert d.totals["joint draws"] == 5 and "joint draws" not in d.shares and d.counts["joint draws"] == 0
    d.check(None, "joint draws", share=0.9)  # no count: the share is not recorded either
    assert "joint draws" not in d.shares


def test_progress_lines_and_heartbeats_at_their_pace():
    lines: list[str] = []
    d = Deadline(None, progress=lines.append, every=0.0)
    d.check(12, "joint draws")
    d.check(None, "verifying")
    assert len(lines) == 2 and lines[0].startswith("  ... 12 joint draws, ") and lines[0].endswith(" s")
    assert lines[1].startswith("  ... verifying, ")
    beats: list[str] = []
    h = Deadline(None, progress=lines.append, every=0.0, heartbeat=lambda dl, where: beats.append(where))
    h.check(1, "joint draws")
    assert beats == ["joint draws"] and len(lines) == 2  # the heartbeat replaces the line
    slow = Deadline(None, progress=lines.append, every=3600)
    slow.check(1, "joint draws")
    assert len(lines) == 2


def test_the_work_estimate_reads_the_deadline_once_per_law_entry():
    from rheo.reference import make_instance
    from rheo.reference.estimate import work_estimate

    # a root law and a default law of 4 entries each: the pass over the listed laws reads 8,
    # the root's own count 4 more
    inst = make_instance(
        4, ["1/4"] * 4, {(): ["1/2", "1/2", "0", "0"], "*": ["1/4"] * 4}, policy="rheo", K=3, m=1, depth=2, budget=4
    )
    d = CountingDeadline()
    work_estimate(inst, "naive", d)
    assert d.checked == {"estimating the work": 12}


def test_a_new_deadline_is_in_no_phase_and_paces_progress_every_two_seconds():
    d = Deadline(None)
    assert d.phase is None and d.every == 2.0 and d.counts == d.totals == d.shares == d.started == {}
    before = time.perf_counter()
    d.begin("joint draws")
    assert before <= d.started["joint draws"] <= time.perf_counter()


def test_the_next_progress_line_waits_its_turn_and_a_heartbeat_gets_the_deadline():
    lines: list[str] = []
    d = Deadline(None, progress=lines.append, every=0.05)
    d.check(1, "joint draws")
    assert lines == []  # not yet 0.05 s
    time.sleep(0.06)
    d.check(2, "joint draws")
    d.check(3, "joint draws")  # right after a line: the next one is 0.05 s away
    assert len(lines) == 1 and lines[0].startswith("  ... 2 joint draws")
    seen: list[object] = []
    h = Deadline(None, every=0.0, heartbeat=lambda dl, where: seen.append(dl))
    h.check(1, "joint draws")
    assert seen == [h]


def test_an_instance_keeps_the_deadline_it_was_made_with():
    from rheo.reference import make_instance

    d = Deadline(60)
    inst = make_instance(2, ["1/2"] * 2, ["1/2"] * 2, deadline=d, policy="topk", K=1, depth=1, budget=1)
    assert inst.deadline is d


def test_run_stack_counts_its_calls_under_its_name():
    """One deadline check per nested call, with the count of calls so far (progress lines),
    under the name given ("steps" by default)."""
    from rheo.reference.stack import run_stack

    def depth_sum(k):
        if k == 0:
            return 0
        below = yield depth_sum(k - 1)
        return k + below

    for what, args in [("steps", ()), ("verified nodes", ("verified nodes",))]:
        d = CountingDeadline()
        assert run_stack(depth_sum(4), d, *args) == 10
        assert d.checked == {what: 4} and d.counts[what] == 4
