"""The client's progress lines for a sweep on a cluster, on standard error: the plan, each
run's start and end with the machine it runs on (runs of different seeds overlap, so each
line names its machine and a run's time is the worker's), each rerun, and the overall count.
The words are those of a local run's lines (:mod:`experiments.progress.text`), with the
machine added; a local run's live bar and time left are not drawn (runs overlap).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from experiments.cluster.attempts import Attempts
from experiments.cluster.job import TOPIC
from experiments.progress import Display, Step, text

__all__ = ["TOPIC", "ClusterProgress"]


class ClusterProgress:
    """The lines of one sweep (``sweep``, its id in the events) of ``steps`` (every run, by
    sequence number) on ``display`` (None: silent), and the seeds' :class:`Attempts`."""

    def __init__(
        self, display: Display | None, title: str, steps: Sequence[Step], sweep: str
    ) -> None:
        self.display = display
        self.title = title
        self.steps = tuple(steps)
        self.sweep = sweep
        self.attempts = Attempts()
        self._lock = threading.Lock()
        self._started = time.monotonic()
        #: When each seed's task first told that it started (the client's clock).
        self.seed_started_at: dict[int, float] = {}

    def plan(self, address: str, seeds: int, workers: int) -> None:
        total = text.counted(len(self.steps), "runs")
        self._say(
            f"{self.title}: {total} of {text.counted(seeds, 'seeds')} on cluster {address}, "
            f"{text.counted(workers, 'workers')}"
        )

    def event(self, event: tuple[float, Mapping[str, Any]]) -> None:
        """A task's event (``Client.subscribe_topic``'s handler): ``(time, message)``."""
        _, message = event
        if message.get("sweep") != self.sweep:
            return  # another client's sweep on the same scheduler
        with self._lock:
            seed, machine, worker = message["seed"], message["machine"], message["worker"]
            kind = message["kind"]
            if kind == "seed":
                self.seed_started_at.setdefault(seed, time.monotonic())
                replaced = self.attempts.started(seed, machine, worker)
                if replaced is not None:
                    self._say(
                        f"{self.title} seed {seed}: rerun on {machine} ({worker}); "
                        f"{replaced.machine} ({replaced.worker}) stopped mid-run after "
                        f"{len(replaced.ended)} run(s), dropped; "
                        f"{len(self.attempts.done())} of {len(self.steps)} done"
                    )
            elif kind == "began":
                self._say(f"{self._where(message['index'], machine)}: started")
            elif kind == "ended":
                self.attempts.ended(seed, worker, message["index"])
                self._say(
                    f"{self._where(message['index'], machine)}: done in "
                    f"{text.duration(message['took_s'])}, {message['figure']}; "
                    f"{len(self.attempts.done())} of {len(self.steps)} done"
                )

    def taken(self, seed: int, worker: str) -> None:
        """Seed ``seed``'s result came from ``worker``: later starts of it are ignored
        (:meth:`Attempts.taken`)."""
        with self._lock:
            self.attempts.taken(seed, worker)

    def settle(self, total: int, timeout_s: float = 5.0) -> None:
        """Wait (up to ``timeout_s``) for the last events: they travel through the scheduler
        apart from the results, and may come after the last result."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.attempts.done()) >= total:
                    return
            time.sleep(0.05)

    def final(self, ended: str = "") -> None:
        """The last line: the count done, in how long, how it ended when not in full."""
        with self._lock:
            done = len(self.attempts.done())
            took = time.monotonic() - self._started
            self._say(text.final_line(self.title, done, len(self.steps), "runs", took, ended))

    def _where(self, index: int, machine: str) -> str:
        place = text.place(index, len(self.steps))
        return f"{self.title} {place} {self.steps[index].label} on {machine}"

    def _say(self, line: str) -> None:
        if self.display is None:
            return
        try:
            self.display.stream.write(line + "\n")
            self.display.stream.flush()
        except (OSError, ValueError):  # a closed pipe: the sweep goes on unheard
            self.display = None
