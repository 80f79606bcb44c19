"""The fault scenarios' tally: which extra executions a fault explains."""

from __future__ import annotations

from bench.faults import Event, tally

A, B = 101, 202
T = "t1"


def _events(lines: str) -> list[Event]:
    out = []
    for line in lines.strip().splitlines():
        kind, pid, subject = line.split()
        out.append(Event(kind, int(pid), subject))
    return out


def test_a_reclaim_after_the_first_runner_stopped_is_explained() -> None:
    t = tally(_events(f"S {A} {T}\nF {A} stop-long:4.2\nS {B} {T}\nD {B} {T}\nD {A} {T}"), [T])
    assert t.unexplained == [] and dict(t.explained_by) == {"stop-long": 1}


def test_a_second_run_without_any_fault_is_unexplained() -> None:
    t = tally(_events(f"S {A} {T}\nD {A} {T}\nS {B} {T}\nD {B} {T}"), [T])
    assert t.unexplained == [T]


def test_a_start_journalled_after_the_stop_it_preceded_is_explained() -> None:
    # As journalled in a chaos run: A started the handler, was stopped before the
    # handler's first line, B reclaimed the task, and A's start line came on resuming
    # (its first line after the stop).
    journal = f"""
        S {A} other
        F {A} stop-long:4.81
        S {B} {T}
        S {A} {T}
        D {B} {T}
        D {A} {T}
        D {A} other
    """
    t = tally(_events(journal), [T, "other"])
    assert t.unexplained == [] and dict(t.explained_by) == {"stop-long": 1}


def test_a_stopped_process_that_went_on_before_the_start_does_not_explain_it() -> None:
    # A resumed and finished other work first: this start began after the stop.
    journal = f"""
        S {A} other
        F {A} stop-long:4.81
        S {B} {T}
        D {A} other
        S {A} {T}
        D {B} {T}
        D {A} {T}
    """
    assert tally(_events(journal), [T, "other"]).unexplained == [T]


def test_a_stop_after_the_peer_started_does_not_explain_the_reordering() -> None:
    journal = f"S {B} {T}\nF {A} stop-long:4.0\nS {A} {T}\nD {B} {T}\nD {A} {T}"
    assert tally(_events(journal), [T]).unexplained == [T]
