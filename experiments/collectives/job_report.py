"""A collective job's report as a run's record holds it: ``collective.report``'s figures
(per-iteration time, algbw and busbw, job completion time, network-wait share, a failure's
time and reason), typed, and the job in the runner's transfer terms."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from collective.plans import ELEMENT_BYTES, make_plan
from collective.report import Failure, JobResult, summarize
from collective.roce import RoceSettings
from experiments.records import Failure as TransferFailure
from experiments.records import Transfer


@dataclass(frozen=True)
class IterationRecord:
    """One iteration, on the job's clock (``collective.report.iteration_record``)."""

    iteration: int
    start_s: float
    end_s: float
    time_s: float
    algbw_Bps: float
    busbw_Bps: float

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> IterationRecord:
        """An iteration record as ``collective.report`` writes it (also to the job's hooks)."""
        return cls(
            iteration=int(record["iteration"]),
            start_s=float(record["start_s"]),
            end_s=float(record["end_s"]),
            time_s=float(record["time_s"]),
            algbw_Bps=float(record["algbw_Bps"]),
            busbw_Bps=float(record["busbw_Bps"]),
        )


@dataclass(frozen=True)
class JobReport:
    """A job's report (``collective.report.summarize``): its parameters (a RoCE job's profile,
    QPs to each peer and timeout among them), every iteration, the figures over the job (None
    where it ran no iteration, or failed), its verification, and its failure."""

    collective: str
    ranks: int
    hosts: tuple[str, ...]
    size_bytes: int
    iterations: int
    transport: str
    roce: RoceSettings | None
    compute_s: float
    bus_factor: float
    completed_iterations: int
    per_iteration: tuple[IterationRecord, ...]
    time_per_iteration_s: float | None
    algbw_Bps: float | None
    busbw_Bps: float | None
    job_completion_s: float | None
    network_wait_share: float | None
    verified: tuple[str, ...]
    wrong_ranks: tuple[int, ...]
    wrong_elements: int
    failed: bool
    failure: Failure | None
    ok: bool


def job_report(result: JobResult) -> JobReport:
    """The report of a job that ran (failed or not)."""
    report = summarize(result)
    return JobReport(
        collective=report["collective"],
        ranks=report["ranks"],
        hosts=tuple(report["hosts"]),
        size_bytes=report["size_bytes"],
        iterations=report["iterations"],
        transport=report["transport"],
        roce=result.roce,
        compute_s=report["compute_s"],
        bus_factor=report["bus_factor"],
        completed_iterations=report["completed_iterations"],
        per_iteration=tuple(IterationRecord.of(r) for r in report["per_iteration"]),
        time_per_iteration_s=report["time_per_iteration_s"],
        algbw_Bps=report["algbw_Bps"],
        busbw_Bps=report["busbw_Bps"],
        job_completion_s=report["job_completion_s"],
        network_wait_share=report["network_wait_share"],
        verified=tuple(report["verified"]),
        wrong_ranks=tuple(report["wrong_ranks"]),
        wrong_elements=report["wrong_elements"],
        failed=report["failed"],
        failure=result.failure,
        ok=report["ok"],
    )


def job_transfer(result: JobResult, job: JobReport) -> Transfer:
    """The job in the runner's transfer terms: the payload its ranks sent, whether it
    completed with exact results, bytes wrong (0 when verified; None when it failed)."""
    plans = [
        make_plan(result.collective, rank, result.ranks, result.size)
        for rank in range(result.ranks)
    ]
    sent = sum(plan.bytes_sent for plan in plans) * job.completed_iterations
    completion = job.job_completion_s
    failure: TransferFailure | None = None
    if job.failure is not None:
        failure = TransferFailure(job.failure.reason, failed_at_s=job.failure.at_s)
    elif not job.ok:
        failure = TransferFailure(f"wrong result on ranks {list(job.wrong_ranks)}")
    return Transfer(
        bytes_sent=sent,
        bytes_delivered=sent if job.ok else None,
        # bytes of the results that differ from the exact value (unknown for a failed job)
        bytes_lost=None if job.failed else result.wrong_elements * ELEMENT_BYTES,
        completed=job.ok,
        goodput_bps=8 * sent / completion if completion else 0.0,
        retransmits={},
        failure=failure,
    )
