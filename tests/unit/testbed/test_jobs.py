"""The testbed's record of its collective jobs: a job is ``setting up`` until its ranks are
connected, ``running`` with each iteration's record as the job reports it, then ``done`` with
its summary or ``failed`` with why; the hooks it hands the job record the progress and still
call the caller's; a snapshot is a copy, newest job first, and only the newest few are kept."""

from __future__ import annotations

from collective.job import JobHooks, JobSpec
from collective.plans import Collective
from collective.report import Failure, JobResult, RankIteration, iteration_record
from testbed.jobs import JOBS_KEPT, JobBoard

SPEC = JobSpec(Collective.ALLREDUCE, 4096, iterations=2)
HOSTS = ["h1", "h2", "h3", "h4"]


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def _result(iterations_done: int, failure: Failure | None = None) -> JobResult:
    per_rank = [
        [RankIteration(10.0 + i, 10.5 + i + rank * 0.1, 0.01) for i in range(iterations_done)]
        for rank in range(len(HOSTS))
    ]
    result = JobResult(
        Collective.ALLREDUCE, len(HOSTS), 4096, 2, "mrc", 0.0, 10.0, per_rank, hosts=HOSTS
    )
    result.failure = failure
    if failure is None and iterations_done == 2:
        result.verified = [f"rank {r}: exact" for r in range(len(HOSTS))]
    return result


def test_a_job_goes_from_setting_up_to_running_to_done():
    clock = Clock()
    board = JobBoard(clock)
    job = board.begin(SPEC, HOSTS)
    (first,) = board.snapshot()
    assert first["state"] == "setting up" and first["hosts"] == HOSTS and first["ranks"] == 4
    assert first["collective"] == "allreduce" and first["iterations"] == 2
    assert first["ended_s_ago"] is None

    board.connected(job, [[3, 4], [5], [6], [7]])
    result = _result(2)
    board.iteration(job, iteration_record(result, 0))
    (running,) = board.snapshot()
    assert running["state"] == "running" and running["qps"] == [[3, 4], [5], [6], [7]]
    assert running["completed"] == 1
    assert running["records"][0]["time_s"] == iteration_record(result, 0)["time_s"]

    board.iteration(job, iteration_record(result, 1))
    board.finish(job, result)
    clock.now += 7
    (done,) = board.snapshot()
    assert done["state"] == "done" and done["error"] is None and done["completed"] == 2
    assert done["summary"]["busbw_Bps"] > 0 and done["ended_s_ago"] == 7


def test_a_failed_job_says_why():
    board = JobBoard(Clock())
    stalled = board.begin(SPEC, HOSTS)
    board.finish(stalled, _result(1, Failure(3.0, 2, "rank 2: QP to rank 1 completed RETRY")))
    refused = board.begin(SPEC, HOSTS)
    board.fail(refused, "setting the job up failed: no agent")
    newest, oldest = board.snapshot()
    assert newest["id"] == refused and newest["state"] == "failed"
    assert newest["error"] == "setting the job up failed: no agent"
    assert oldest["state"] == "failed" and oldest["error"].startswith("rank 2: QP to rank 1")
    assert oldest["summary"]["failed"] is True


def test_an_unverified_job_is_not_done():
    board = JobBoard(Clock())
    job = board.begin(SPEC, HOSTS)
    wrong = _result(2)
    wrong.wrong_ranks = [1]
    board.finish(job, wrong)
    (record,) = board.snapshot()
    assert record["state"] == "failed" and "wrong result on ranks [1]" in record["error"]


def test_the_hooks_record_progress_and_call_the_callers():
    board = JobBoard(Clock())
    job = board.begin(SPEC, HOSTS)
    heard: list[object] = []
    caller = JobHooks(on_connected=heard.append, on_iteration=heard.append, on_start=heard.append)
    hooks = board.hooks(job, caller)
    assert hooks.stop is caller.stop, "the caller can still stop the job"
    assert hooks.on_connected is not None and hooks.on_iteration is not None
    assert hooks.on_start is not None
    hooks.on_connected([[1], [2], [3], [4]])
    hooks.on_start(12.0)
    hooks.on_iteration(iteration_record(_result(1), 0))
    (record,) = board.snapshot()
    assert record["qps"] == [[1], [2], [3], [4]] and record["completed"] == 1
    assert heard[:2] == [[[1], [2], [3], [4]], 12.0] and len(heard) == 3


def test_a_snapshot_is_a_copy_and_old_jobs_are_forgotten():
    board = JobBoard(Clock())
    jobs = [board.begin(SPEC, HOSTS) for _ in range(JOBS_KEPT + 2)]
    snapshot = board.snapshot()
    assert [j["id"] for j in snapshot] == list(reversed(jobs))[:JOBS_KEPT]
    snapshot[0]["hosts"].append("h9")
    snapshot[0]["records"].append({})
    again = board.snapshot()[0]
    assert again["hosts"] == HOSTS and again["records"] == []
    board.iteration(jobs[0], {"iteration": 0})  # a forgotten job's late report: ignored
    assert len(board.snapshot()) == JOBS_KEPT
