"""A job's figures, as nccl-tests reports them, and the job-level ones it does not.

Per iteration: its time (from the first rank starting the collective to the last rank
finishing it: a step ends when the slowest transfer of the slowest rank ends), the algorithm
bandwidth ``size / time`` and the bus bandwidth, ``algbw`` times 2(N-1)/N for all-reduce and
(N-1)/N for all-gather, reduce-scatter and all-to-all (what each rank's link must carry, so
that it compares with the links' rate whatever N is). Over the job: its completion time
(first start to last end, compute time included), the time per iteration and bandwidths
averaged over the iterations, and the share of the ranks' time spent waiting on the network
(in the collective, neither computing nor reducing: a GPU-idle proxy). A failed job says
when (seconds after it started) and why.

Everything here is plain data in, plain data out (JSON-ready dicts), so the CLI, the
experiment and the tests share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from collective.plans import Collective
from collective.roce import RoceSettings


@dataclass
class RankIteration:
    """One rank's part of one iteration (times on the job's clock, in seconds)."""

    #: The collective started (after any compute time).
    start: float
    end: float
    #: Time in the rank's own work (reductions, copies, posting): not waiting.
    work_s: float


@dataclass
class Failure:
    """Why and when a job stopped: ``at_s`` after the job started, which rank saw it."""

    at_s: float
    rank: int | None
    reason: str


@dataclass
class JobResult:
    """What a job did: its parameters, every rank's iterations, verification, failure."""

    collective: Collective
    ranks: int
    size: int
    iterations: int
    transport: str
    compute_s: float
    #: When the ranks were all connected and started (the job's clock origin).
    started: float
    #: ``per_rank[r][i]``: rank r's iteration i (as far as it got).
    per_rank: list[list[RankIteration]]
    #: Each rank's verdict lines, once the job completed (empty when it failed).
    verified: list[str] = field(default_factory=list)
    wrong_ranks: list[int] = field(default_factory=list)
    #: Elements, over every rank, that differ from the exact value.
    wrong_elements: int = 0
    failure: Failure | None = None
    hosts: list[str] = field(default_factory=list)
    #: How a RoCE job ran RoCE (None for MRC).
    roce: RoceSettings | None = None
    #: Slices each ring step was cut into (1: steps in lockstep).
    slices: int = 1

    @property
    def completed_iterations(self) -> int:
        """Iterations every rank finished."""
        return min((len(its) for its in self.per_rank), default=0)

    @property
    def ok(self) -> bool:
        """Every iteration ran and every rank's result was exact."""
        return (
            self.failure is None
            and self.completed_iterations == self.iterations
            and bool(self.verified)
            and not self.wrong_ranks
        )


def iteration_time(result: JobResult, index: int) -> float:
    """Iteration ``index``'s time: the first rank's start to the last rank's end."""
    starts = [its[index].start for its in result.per_rank]
    ends = [its[index].end for its in result.per_rank]
    return max(ends) - min(starts)


def bandwidths(
    collective: Collective, ranks: int, size: int, seconds: float
) -> tuple[float, float]:
    """(algbw, busbw) in bytes per second for ``size`` bytes in ``seconds``."""
    if seconds <= 0:
        return 0.0, 0.0
    algbw = size / seconds
    return algbw, algbw * collective.bus_factor(ranks)


def iteration_record(result: JobResult, index: int) -> dict[str, Any]:
    """One iteration as the CLI prints it and summary.json stores it."""
    time_s = iteration_time(result, index)
    algbw, busbw = bandwidths(result.collective, result.ranks, result.size, time_s)
    return {
        "iteration": index,
        "start_s": min(its[index].start for its in result.per_rank) - result.started,
        "end_s": max(its[index].end for its in result.per_rank) - result.started,
        "time_s": time_s,
        "algbw_Bps": algbw,
        "busbw_Bps": busbw,
    }


def network_wait_share(result: JobResult, job_s: float) -> float | None:
    """The ranks' time in the collective but not in their own work, over the job's time on
    every rank (None for a job of no time)."""
    if job_s <= 0:
        return None
    waiting = sum(
        max(0.0, (it.end - it.start) - it.work_s) for its in result.per_rank for it in its
    )
    return waiting / (job_s * result.ranks)


def summarize(result: JobResult) -> dict[str, Any]:
    """The job's report: parameters, per-iteration records, the job's figures."""
    done = result.completed_iterations
    records = [iteration_record(result, i) for i in range(done)]
    ends = [its[-1].end for its in result.per_rank if its]
    if result.failure is not None:
        job_s: float | None = None
        span = result.failure.at_s
    else:
        job_s = (max(ends) - result.started) if done == result.iterations and ends else None
        span = job_s or 0.0
    times = [r["time_s"] for r in records]
    mean_time = sum(times) / len(times) if times else None
    algbw, busbw = (
        bandwidths(result.collective, result.ranks, result.size, mean_time)
        if mean_time
        else (None, None)
    )
    return {
        "collective": result.collective.value,
        "ranks": result.ranks,
        "hosts": result.hosts,
        "size_bytes": result.size,
        "iterations": result.iterations,
        "transport": result.transport,
        "roce": asdict(result.roce) if result.roce is not None else None,
        "compute_s": result.compute_s,
        "slices": result.slices,
        "bus_factor": result.collective.bus_factor(result.ranks),
        "completed_iterations": done,
        "per_iteration": records,
        "time_per_iteration_s": mean_time,
        "algbw_Bps": algbw,
        "busbw_Bps": busbw,
        "job_completion_s": job_s,
        "network_wait_share": network_wait_share(result, span),
        "verified": result.verified,
        "wrong_ranks": result.wrong_ranks,
        "wrong_elements": result.wrong_elements,
        "failed": result.failure is not None,
        "failure": asdict(result.failure) if result.failure is not None else None,
        "ok": result.ok,
    }


def _rate(bps: float | None) -> str:
    return "-" if bps is None else f"{bps / 1e6:.3f}"


def header() -> str:
    """nccl-tests' columns, in MB/s (10^6 bytes) as they print GB/s."""
    return f"{'iter':>5} {'time(s)':>10} {'algbw(MB/s)':>12} {'busbw(MB/s)':>12}"


def iteration_line(record: dict[str, Any]) -> str:
    """One iteration under :func:`header`."""
    return (
        f"{record['iteration']:>5} {record['time_s']:>10.4f} "
        f"{_rate(record['algbw_Bps']):>12} {_rate(record['busbw_Bps']):>12}"
    )


def text(summary: dict[str, Any]) -> list[str]:
    """The job's summary lines, after the iteration lines."""
    roce = summary["roce"]
    transport = summary["transport"]
    if roce is not None:
        transport += f", {RoceSettings(**roce).describe()}"
    if summary["slices"] > 1:
        transport += f", {summary['slices']} slices a step"
    lines = [
        f"{summary['collective']} of {summary['size_bytes']} bytes over {summary['ranks']} ranks "
        f"({transport}): {summary['completed_iterations']}/{summary['iterations']} iterations"
    ]
    if summary["time_per_iteration_s"] is not None:
        lines.append(
            f"time per iteration {summary['time_per_iteration_s']:.4f} s, algbw "
            f"{_rate(summary['algbw_Bps'])} MB/s, busbw {_rate(summary['busbw_Bps'])} MB/s "
            f"(x{summary['bus_factor']:.3f})"
        )
    share = summary["network_wait_share"]
    wait = "-" if share is None else f"{share * 100:.1f} %"
    if summary["failed"]:
        failure = summary["failure"]
        who = "" if failure["rank"] is None else f" (rank {failure['rank']})"
        lines.append(f"FAILED {failure['at_s']:.3f} s into the job{who}: {failure['reason']}")
    else:
        lines.append(
            f"job completion {summary['job_completion_s']:.3f} s; waiting on the network {wait}"
        )
    if summary["wrong_ranks"]:
        lines.append(f"WRONG RESULT on ranks {summary['wrong_ranks']}")
    elif summary["verified"]:
        lines.append(f"verified: every element of every rank's result exact ({summary['ranks']})")
    return lines


def iteration_bounds(records: Sequence[dict[str, Any]]) -> list[tuple[float, float]]:
    """(start, end) of each iteration on the job's clock, for figures."""
    return [(r["start_s"], r["end_s"]) for r in records]
