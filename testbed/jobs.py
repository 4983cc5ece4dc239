"""The collective jobs a testbed runs, as plain data that its views read while they run.

``Testbed.collective`` records each job here (``JobBoard``): its parameters, its ranks' hosts
and QP numbers once connected, each iteration's record as the job reports it
(``collective.report.iteration_record``, the figures nccl-tests prints) and, at the end, the
job's summary or its error. The job runs in the caller's thread and a view (the live page's
server) reads from its own, so the board is the one place both meet: writers and
``snapshot`` take its lock, and a snapshot is a copy a reader may keep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from collective.job import JobHooks, JobSpec
from collective.report import JobResult, summarize

#: Jobs kept on the board (the newest); older ones are forgotten.
JOBS_KEPT = 8
#: Iteration records a snapshot carries per job (the newest).
RECORDS_SHOWN = 60


@dataclass
class JobProgress:
    """One job as far as it got: ``state`` is ``setting up``, ``running``, ``done`` or
    ``failed`` (with ``error``); ``qps[r]`` are rank r's QP numbers on ``hosts[r]``'s agent."""

    id: int
    collective: str
    hosts: list[str]
    size: int
    iterations: int
    transport: str
    state: str = "setting up"
    qps: list[list[int]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    summary: dict[str, Any] | None = None
    #: The board's clock when the job ended (None while it runs).
    ended: float | None = None

    def to_json(self, now: float) -> dict[str, Any]:
        return {
            "id": self.id,
            "collective": self.collective,
            "hosts": list(self.hosts),
            "ranks": len(self.hosts),
            "size_bytes": self.size,
            "iterations": self.iterations,
            "transport": self.transport,
            "state": self.state,
            "qps": [list(q) for q in self.qps],
            "completed": len(self.records),
            "records": [dict(r) for r in self.records[-RECORDS_SHOWN:]],
            "error": self.error,
            "summary": None if self.summary is None else dict(self.summary),
            "ended_s_ago": None if self.ended is None else now - self.ended,
        }


class JobBoard:
    """The jobs of one testbed, newest last; every method may be called from any thread."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._jobs: list[JobProgress] = []
        self._next = 1

    def begin(self, spec: JobSpec, hosts: Sequence[str]) -> int:
        """Record a job about to be set up; its id."""
        with self._lock:
            job = JobProgress(
                self._next,
                spec.collective.value,
                list(hosts),
                spec.size,
                spec.iterations,
                spec.transport,
            )
            self._next += 1
            self._jobs = [*self._jobs, job][-JOBS_KEPT:]
            return job.id

    def connected(self, job_id: int, qps: Sequence[Sequence[int]]) -> None:
        """Every rank is connected: rank r's QP numbers are ``qps[r]``."""
        with self._lock:
            job = self._find(job_id)
            if job is not None:
                job.qps = [list(q) for q in qps]
                job.state = "running"

    def iteration(self, job_id: int, record: dict[str, Any]) -> None:
        """Every rank finished one more iteration (its record)."""
        with self._lock:
            job = self._find(job_id)
            if job is not None:
                job.records.append(dict(record))

    def finish(self, job_id: int, result: JobResult) -> None:
        """The job ended: ``done`` when every iteration ran and every result is exact."""
        summary = summarize(result)
        with self._lock:
            job = self._find(job_id)
            if job is None:
                return
            job.summary = summary
            job.ended = self._clock()
            if result.ok:
                job.state = "done"
            else:
                job.state = "failed"
                if result.failure is not None:
                    job.error = result.failure.reason
                elif result.wrong_ranks:
                    job.error = f"wrong result on ranks {result.wrong_ranks}"
                else:
                    job.error = (
                        f"{result.completed_iterations} of {result.iterations} iterations ran"
                    )

    def fail(self, job_id: int, error: str) -> None:
        """The job could not run (set-up refused, an agent gone): why."""
        with self._lock:
            job = self._find(job_id)
            if job is not None:
                job.state = "failed"
                job.error = error
                job.ended = self._clock()

    def hooks(self, job_id: int, caller: JobHooks | None = None) -> JobHooks:
        """Hooks that record the job's progress here, then call ``caller``'s: its ``stop``
        event still stops the job (the same event); its ``stop_reason`` is copied now, so set
        it before the job starts."""
        caller = caller or JobHooks()

        def on_connected(qps: list[list[int]]) -> None:
            self.connected(job_id, qps)
            if caller.on_connected is not None:
                caller.on_connected(qps)

        def on_iteration(record: dict[str, Any]) -> None:
            self.iteration(job_id, record)
            if caller.on_iteration is not None:
                caller.on_iteration(record)

        return JobHooks(
            on_connected=on_connected,
            on_start=caller.on_start,
            on_iteration=on_iteration,
            stop=caller.stop,
            stop_reason=caller.stop_reason,
        )

    def snapshot(self) -> list[dict[str, Any]]:
        """Every kept job as JSON-ready data, newest first (a copy)."""
        with self._lock:
            now = self._clock()
            return [job.to_json(now) for job in reversed(self._jobs)]

    def _find(self, job_id: int) -> JobProgress | None:
        return next((job for job in self._jobs if job.id == job_id), None)
