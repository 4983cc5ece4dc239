"""Which worker ran which seed, from the events the tasks tell (:mod:`experiments.cluster.task`):
a seed that starts on a second worker was rerun, because the first was lost mid-run (a task
whose run failed comes back as a result and is never rerun), and what the first had made of
it was dropped: only the result of the attempt that finished is merged.

Once a seed's result is taken (:meth:`Attempts.taken`), the attempt that gave it is the seed's
last: an attempt that starts after it (the scheduler running a finished task again because the
worker holding its result was lost before the client released it) is ignored, neither a rerun
nor an attempt.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from experiments.summary import Rerun


@dataclass
class Attempt:
    """One start of a seed on a worker, and the runs it finished there."""

    machine: str
    worker: str
    ended: set[int] = field(default_factory=set)


class Attempts:
    """Every seed's attempts, in the order they started."""

    def __init__(self) -> None:
        self.by_seed: dict[int, list[Attempt]] = {}
        #: Seeds whose result was taken: the attempt that gave it is their last one.
        self._closed: set[int] = set()
        #: Seeds whose result was taken before its attempt's start was told: the worker
        #: (address) of that attempt, which closes the seed when it is told.
        self._awaited: dict[int, str] = {}

    def started(self, seed: int, machine: str, worker: str) -> Attempt | None:
        """Seed ``seed`` started on ``worker``; the attempt it replaces (None: its first, or
        an attempt ignored because the seed's result was already taken)."""
        if seed in self._closed:
            return None
        attempts = self.by_seed.setdefault(seed, [])
        replaced = attempts[-1] if attempts else None
        attempts.append(Attempt(machine, worker))
        if self._awaited.get(seed) == worker:
            del self._awaited[seed]
            self._closed.add(seed)
        return replaced

    def taken(self, seed: int, worker: str) -> None:
        """Seed ``seed``'s result, from ``worker`` (its address), was taken: its attempts
        end with the latest one on ``worker``, and any later start is ignored. When no
        attempt on ``worker`` has been told yet (its event still on its way), the seed
        closes with the first that is."""
        attempts = self.by_seed.get(seed, [])
        for index in range(len(attempts) - 1, -1, -1):
            if attempts[index].worker == worker:
                del attempts[index + 1 :]
                self._closed.add(seed)
                return
        self._awaited[seed] = worker

    def ended(self, seed: int, worker: str, index: int) -> None:
        """Run ``index`` of ``seed`` ended on ``worker``."""
        for attempt in reversed(self.by_seed.get(seed, [])):
            if attempt.worker == worker:
                attempt.ended.add(index)
                return

    def done(self) -> set[int]:
        """The runs ended in each seed's latest attempt: the ones that will be merged."""
        return {index for attempts in self.by_seed.values() for index in attempts[-1].ended}

    def count(self, seed: int) -> int:
        return len(self.by_seed.get(seed, []))

    def reruns(self, runs_per_seed: int, gone: set[str]) -> tuple[Rerun, ...]:
        """Each seed started again, with the worker it was lost on; ``gone`` are the
        workers no longer in the cluster (a worker still there was not lost but, say,
        restarted by its nanny)."""
        reruns = []
        for seed, attempts in sorted(self.by_seed.items()):
            for lost, next_attempt in itertools.pairwise(attempts):
                state = "lost" if lost.worker in gone else "restarted"
                reruns.append(
                    Rerun(
                        seed=seed,
                        lost_worker=lost.worker,
                        lost_machine=lost.machine,
                        runs_dropped=len(lost.ended),
                        why=(
                            f"worker {lost.machine} ({lost.worker}) was {state} mid-run after "
                            f"{len(lost.ended)} of {runs_per_seed} run(s), which were "
                            f"dropped; rerun on {next_attempt.machine} ({next_attempt.worker})"
                        ),
                    )
                )
        return tuple(reruns)
