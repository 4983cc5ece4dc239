"""One collective run: the job in the mode's transport and scenario, the scenario's event
on the job's timeline (:class:`experiments.schedule.Schedule`), and the run's record: the
job's report, the event, what the links allow, the recovery around the event."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from collective.job import JobError, JobHooks
from collective.report import JobResult
from experiments.collectives.job_report import IterationRecord, JobReport, job_report, job_transfer
from experiments.collectives.modes import CollectiveMode, Params, Scenario, cut_ends, variant
from experiments.collectives.rings import allowed_busbw, job_hosts, second_ring
from experiments.fabric_loss import FabricLoss, fabric_loss
from experiments.json_form import FLAT
from experiments.progress import event
from experiments.records import Transfer
from experiments.schedule import Schedule
from testbed.session import Testbed

#: An iteration is back to normal when its time is within this factor of the median
#: iteration time before the event.
NORMAL_FACTOR = 1.25


@dataclass(frozen=True)
class EventRecord:
    """What the scenario's event was (None: nothing happened) and when, seconds into the job."""

    what: str | None
    at_s: float | None


@dataclass(frozen=True)
class Recovery:
    """Around an event: the median iteration time before it (the baseline), the iteration
    it fell in, that iteration's time over the baseline, and how many iterations after it
    came before one was back within NORMAL_FACTOR of the baseline (None: none was)."""

    baseline_s: float | None
    event_iteration: int | None
    slowdown: float | None
    iterations: int | None


@dataclass(frozen=True)
class CollectiveRun:
    """One run's record: its mode, the routing policy its network ran, the ranks' hosts, the
    job's report, the event, the bus bandwidth the links allow and the share of it the job
    got, the recovery around the event, the second job's report or error, the loss the
    rules applied (the loss scenario), the job as a transfer, and what makes the run not the
    experiment it claims to be (``problems``)."""

    mode: CollectiveMode = field(metadata=FLAT)
    routing: str
    hosts: tuple[str, ...]
    job: JobReport
    event: EventRecord
    allowed_busbw_Bps: float
    busbw_of_allowed: float | None
    recovery: Recovery
    second_job: JobReport | None
    second_job_error: str | None
    loss: FabricLoss | None
    transfers: Mapping[str, Transfer]
    problems: tuple[str, ...]
    #: The agents' payload per data packet, for the split of the link bytes.
    payload_bytes: int = 1024


@dataclass(frozen=True)
class CollectiveSeries:
    """A run's time series: the job's iterations and when the event came."""

    per_iteration: tuple[IterationRecord, ...]
    event_at_s: float | None


class _Event:
    """The scenario's event, on the job's timeline: due once ``event_after`` iterations are
    done and half their median time more has passed (at once for ``event_after`` 0); a cut
    link is restored after the job, a second job waited for."""

    def __init__(self, testbed: Testbed, params: Params, mode: CollectiveMode) -> None:
        self.testbed = testbed
        self.params = params
        self.mode = mode
        self.started = 0.0
        self.times: list[float] = []
        self.at_s: float | None = None
        self.what: str | None = None
        self.second: JobResult | None = None
        self.second_error: str | None = None
        self._due_at: float | None = None
        self.schedule = Schedule(testbed, "collective-event")
        if mode.scenario.evented:
            self.schedule.at(self._due, self._fire)
        self.schedule.start()

    def on_start(self, started: float) -> None:
        self.started = started
        if self.params.event_after == 0:
            self._due_at = time.monotonic()

    def on_iteration(self, record: dict[str, Any]) -> None:
        self.times.append(record["time_s"])
        event(
            "iteration %d of %d: %.3f s, busbw %.3f MB/s",
            record["iteration"] + 1,
            self.params.iterations,
            record["time_s"],
            record["busbw_Bps"] / 1e6,
        )
        if len(self.times) == self.params.event_after and self._due_at is None:
            self._due_at = time.monotonic() + statistics.median(self.times) / 2

    def _due(self) -> bool:
        return self._due_at is not None and time.monotonic() >= self._due_at

    def _fire(self) -> None:
        self.at_s = time.monotonic() - self.started
        if self.mode.scenario == Scenario.SECOND_JOB:
            self.what = "second job started"
            self.schedule.start_job("collective-second-job", self._second_job)
            return
        spine, leaf = cut_ends(self.params)
        self.what = f"{self.schedule.cut_link(spine, leaf)} cut"

    def _second_job(self) -> None:
        hosts = second_ring(self.testbed.topology)
        spec = self.params.job_spec(self.mode.transport, len(hosts), self.params.second_iterations)
        try:
            self.second = self.testbed.collective(hosts, spec)
        except JobError as error:
            self.second_error = str(error)

    def finish(self) -> None:
        """Wait for what the event started; bring a cut link back, wait until the controller
        sees it up and give the routing time to converge again."""
        self.schedule.finish()
        if self.schedule.links:
            time.sleep(self.params.converge_s + 1.0)


def run_mode(
    testbed: Testbed, params: Params, mode: CollectiveMode, seed: int
) -> tuple[CollectiveRun, CollectiveSeries]:
    """One job in the mode's transport and scenario."""
    del seed  # each run draws fresh EVs, PSNs and drops; the seed labels it
    hosts = job_hosts(testbed.topology, params)
    spec = params.job_spec(mode.transport, len(hosts))
    event = _Event(testbed, params, mode)
    hooks = JobHooks(on_start=event.on_start, on_iteration=event.on_iteration)
    lossy = mode.scenario == Scenario.LOSS
    if lossy:
        testbed.set_fabric_loss(params.loss_percent / 100)
    loss: FabricLoss | None = None
    try:
        result = testbed.collective(hosts, spec, hooks)
    finally:
        if lossy:
            directions, lldp = testbed.fabric_loss_counters()
            testbed.clear_fabric_loss()
            loss = fabric_loss(directions, lldp)
        event.finish()
    job = job_report(result)
    allowed = allowed_busbw(testbed.topology, hosts, params)
    problems = []
    if lossy and (loss is None or not loss.frames_seen):
        problems.append("the loss rules saw no UDP 4791 frame")
    if mode.scenario.evented and event.at_s is None and not job.failed:
        problems.append("the job ended before its event")
    record = CollectiveRun(
        mode=mode,
        routing=str(variant(params, mode).routing),
        hosts=tuple(hosts),
        job=job,
        event=EventRecord(event.what, event.at_s),
        allowed_busbw_Bps=allowed,
        busbw_of_allowed=job.busbw_Bps / allowed if job.busbw_Bps else None,
        recovery=recovery(job.per_iteration, event.at_s),
        second_job=job_report(event.second) if event.second is not None else None,
        second_job_error=event.second_error,
        loss=loss,
        transfers={"job": job_transfer(result, job)},
        problems=tuple(problems),
        payload_bytes=params.payload_bytes,
    )
    return record, CollectiveSeries(job.per_iteration, event.at_s)


def recovery(records: Sequence[IterationRecord], event_at_s: float | None) -> Recovery:
    """The job's recovery around an event at ``event_at_s`` (see :class:`Recovery`)."""
    if event_at_s is None or not records:
        return Recovery(baseline_s=None, event_iteration=None, slowdown=None, iterations=None)
    before = [r.time_s for r in records if r.end_s <= event_at_s]
    hit = next((r for r in records if r.end_s > event_at_s), None)
    baseline = statistics.median(before) if before else None
    if hit is None or baseline is None:
        return Recovery(baseline_s=baseline, event_iteration=None, slowdown=None, iterations=None)
    after = [r for r in records if r.iteration > hit.iteration]
    back = next((n for n, r in enumerate(after, 1) if r.time_s <= NORMAL_FACTOR * baseline), None)
    if hit.time_s <= NORMAL_FACTOR * baseline:
        back = 0
    return Recovery(
        baseline_s=baseline,
        event_iteration=hit.iteration,
        slowdown=hit.time_s / baseline,
        iterations=back,
    )
