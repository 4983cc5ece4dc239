"""Which worker ran which seed, from the tasks' events: a seed that starts on a second worker
was rerun, the runs it had finished on the first are dropped (only the finished attempt's
result is merged), and the rerun says where it was lost, after how many runs, and where it
ran again."""

from __future__ import annotations

from experiments.cluster.attempts import Attempts

A, B = "tcp://10.0.0.1:4000", "tcp://10.0.0.2:4000"


def test_a_seed_started_once_is_no_rerun_and_its_ended_runs_count_as_done() -> None:
    attempts = Attempts()
    assert attempts.started(0, "machine-a", A) is None
    attempts.ended(0, A, 0)
    attempts.ended(0, A, 1)
    assert attempts.done() == {0, 1}
    assert attempts.count(0) == 1
    assert attempts.reruns(2, gone=set()) == ()


def test_a_seed_started_again_elsewhere_drops_the_first_attempts_runs() -> None:
    attempts = Attempts()
    attempts.started(1, "machine-a", A)
    attempts.ended(1, A, 4)
    replaced = attempts.started(1, "machine-b", B)
    assert replaced is not None and replaced.worker == A and replaced.ended == {4}
    assert attempts.done() == set()
    attempts.ended(1, B, 4)
    assert attempts.done() == {4}
    assert attempts.count(1) == 2


def test_a_rerun_says_where_the_seed_was_lost_after_how_many_runs_and_where_it_ran_again() -> None:
    attempts = Attempts()
    attempts.started(1, "machine-a", A)
    attempts.ended(1, A, 4)
    attempts.started(1, "machine-b", B)
    (rerun,) = attempts.reruns(4, gone={A})
    assert (rerun.seed, rerun.lost_machine, rerun.lost_worker, rerun.runs_dropped) == (
        1,
        "machine-a",
        A,
        1,
    )
    assert rerun.why == (
        f"worker machine-a ({A}) was lost mid-run after 1 of 4 run(s), which were dropped; "
        f"rerun on machine-b ({B})"
    )
    # a worker still in the cluster was not lost: restarted (by a nanny, say)
    (restarted,) = attempts.reruns(4, gone=set())
    assert " was restarted mid-run " in restarted.why


def test_an_attempt_that_starts_after_the_result_was_taken_is_neither_a_rerun_nor_an_attempt() -> (
    None
):
    attempts = Attempts()
    attempts.started(2, "machine-a", A)
    attempts.ended(2, A, 0)
    attempts.taken(2, A)
    # A lost after its result was read: the scheduler ran the finished seed again on B
    assert attempts.started(2, "machine-b", B) is None
    attempts.ended(2, B, 0)
    assert attempts.count(2) == 1
    assert attempts.reruns(1, gone={A}) == ()
    assert attempts.done() == {0}


def test_a_result_taken_before_its_attempts_start_was_told_closes_the_seed_with_that_attempt() -> (
    None
):
    attempts = Attempts()
    attempts.started(3, "machine-a", A)
    attempts.taken(3, B)  # B's start event still on its way
    assert attempts.started(3, "machine-b", B) is not None  # the rerun that gave the result
    attempts.started(3, "machine-a", A)  # started after the result: ignored
    assert attempts.count(3) == 2
    (rerun,) = attempts.reruns(1, gone={A})
    assert rerun.lost_worker == A and rerun.why.endswith(f"rerun on machine-b ({B})")
