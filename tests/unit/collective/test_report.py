"""nccl-tests' figures from a job's per-rank times: iteration time is the first start to the
last end, algbw is size over it, busbw algbw times the collective's factor; the job's
completion time, its network-wait share, and a failed job's time and reason."""

from __future__ import annotations

import pytest

from collective.plans import Collective
from collective.report import (
    Failure,
    JobResult,
    RankIteration,
    bandwidths,
    iteration_line,
    iteration_time,
    network_wait_share,
    summarize,
    text,
)


def job(per_rank, failure=None, verified=("ok",), collective=Collective.ALLREDUCE):
    result = JobResult(collective, len(per_rank), 1_000_000, 2, "mrc", 0.0, 100.0, per_rank)
    result.failure = failure
    result.verified = list(verified) if failure is None else []
    return result


TWO_RANKS = [
    [RankIteration(100.0, 101.0, 0.1), RankIteration(101.0, 102.5, 0.1)],
    [RankIteration(100.2, 101.2, 0.3), RankIteration(101.2, 102.0, 0.0)],
]


def test_an_iteration_lasts_from_the_first_start_to_the_last_end():
    result = job(TWO_RANKS)
    assert iteration_time(result, 0) == pytest.approx(1.2)
    assert iteration_time(result, 1) == pytest.approx(1.5)


def test_bandwidths_follow_nccl_tests():
    assert bandwidths(Collective.ALLREDUCE, 4, 1_000_000, 2.0) == (500_000.0, 750_000.0)
    assert bandwidths(Collective.ALLTOALL, 4, 1_000_000, 2.0) == (500_000.0, 375_000.0)
    assert bandwidths(Collective.ALLGATHER, 4, 1, 0.0) == (0.0, 0.0)


def test_summary_of_a_completed_job():
    summary = summarize(job(TWO_RANKS))
    assert summary["ok"] and not summary["failed"]
    assert summary["roce"] is None and "(mrc)" in text(summary)[0]
    assert summary["slices"] == 1, "steps in lockstep unless the job said otherwise"
    assert summary["completed_iterations"] == 2
    assert summary["job_completion_s"] == pytest.approx(2.5)
    assert summary["time_per_iteration_s"] == pytest.approx(1.35)
    assert summary["algbw_Bps"] == pytest.approx(1_000_000 / 1.35)
    assert summary["busbw_Bps"] == pytest.approx(1_000_000 / 1.35)  # 2(2-1)/2 = 1
    assert [r["iteration"] for r in summary["per_iteration"]] == [0, 1]
    assert summary["per_iteration"][1]["end_s"] == pytest.approx(2.5)


def test_waiting_is_time_in_the_collective_outside_the_ranks_own_work():
    result = job(TWO_RANKS)
    # rank 0: (1.0-0.1) + (1.5-0.1); rank 1: (1.0-0.3) + (0.8-0.0); over 2 ranks x 2.5 s
    assert network_wait_share(result, 2.5) == pytest.approx((0.9 + 1.4 + 0.7 + 0.8) / 5.0)
    assert network_wait_share(result, 0.0) is None


def test_a_sliced_job_says_so():
    result = job(TWO_RANKS)
    result.slices = 4
    summary = summarize(result)
    assert summary["slices"] == 4 and "(mrc, 4 slices a step)" in text(summary)[0]


def test_a_failed_job_reports_when_and_why_and_no_completion_time():
    per_rank = [[RankIteration(100.0, 101.0, 0.0)], [RankIteration(100.0, 101.0, 0.0)]]
    failure = Failure(1.7, 1, "rank 1: WRITE on the QP to rank 0 completed RETRY_EXC_ERR")
    summary = summarize(job(per_rank, failure))
    assert summary["failed"] and not summary["ok"]
    assert summary["job_completion_s"] is None
    assert summary["completed_iterations"] == 1
    assert summary["failure"] == {"at_s": 1.7, "rank": 1, "reason": failure.reason}
    assert any("FAILED 1.700 s into the job (rank 1)" in line for line in text(summary))


def test_a_wrong_result_is_not_ok():
    result = job(TWO_RANKS)
    result.wrong_ranks = [1]
    result.wrong_elements = 3
    summary = summarize(result)
    assert not summary["ok"] and summary["wrong_elements"] == 3
    assert any("WRONG RESULT" in line for line in text(summary))


def test_iteration_lines_are_columns():
    record = summarize(job(TWO_RANKS))["per_iteration"][0]
    assert iteration_line(record).split() == ["0", "1.2000", "0.833", "0.833"]
