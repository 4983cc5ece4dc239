"""A seed's runs on a worker: the function each Dask task calls.

It first tells the client that the seed started here (so the client can time the task's
start and see a seed started again elsewhere: a rerun), refuses the seed when the worker's
tree is not the client's, then writes the topology files into a directory of its own,
brings up and runs the seed's modes in the seed's order (:func:`experiments.plan.plan_seed`,
:func:`experiments.runner.measure`), telling each run's start and end, and gives back what a
local run would have kept of them. A run that raises comes back as :class:`SeedFailed`, a
result: Dask reruns a task only when its worker is lost, never because the run failed.
"""

from __future__ import annotations

import pickle
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from distributed import get_worker

from experiments.capabilities import probe_target_facts
from experiments.cluster.job import (
    TOPIC,
    Outcome,
    Place,
    SeedFailed,
    SeedJob,
    SeedResult,
    refusal,
)
from experiments.cluster.tree import tree_identity
from experiments.plan import plan_seed
from experiments.progress import Progress, Step
from experiments.registry import EXPERIMENTS
from experiments.results import versions
from experiments.runner import measure


def run_seed(pickled_job: bytes) -> Outcome:
    """The seed's runs, or why they were not made (see the module's docstring); the job
    pickled (see :mod:`experiments.cluster.entry`)."""
    job: SeedJob[Any] = pickle.loads(pickled_job)
    worker = get_worker()
    place = Place(machine=str(worker.name), worker=worker.address)
    tell = _Teller(job, place)
    tell.event("seed")
    mine = tree_identity()
    if mine != job.tree:
        return refusal(place, job.seed, mine, job.tree)
    try:
        return _measure_seed(job, place, tell)
    except Exception:  # the run failed: a result to report, not a worker to replace
        return SeedFailed(job.seed, place, traceback.format_exc())


def _measure_seed(job: SeedJob[Any], place: Place, tell: _Teller) -> SeedResult[Any, Any, Any]:
    experiment = EXPERIMENTS[job.experiment]
    with tempfile.TemporaryDirectory(prefix=f"mrc-{job.experiment}-seed{job.seed}-") as tmp:
        directory = Path(tmp)
        for name, text in job.topology_texts.items():
            (directory / name).write_text(text, encoding="utf-8")
        files = {mode: directory / name for mode, name in job.mode_files.items()}
        facts = probe_target_facts(job.target)
        measured = measure(
            experiment,
            plan_seed(experiment, job.params, job.seed),
            files,
            job.variants,
            job.target,
            job.params,
            directory,
            job.path_mode,
            tell,
            first_sequence=job.first_sequence,
            backup=job.backup,
        )
        logs = {
            account.controller_events: (directory / account.controller_events).read_text()
            for account in measured.bring_ups
            if account.controller_events is not None
        }
    return SeedResult(job.seed, place, facts, versions(), measured, logs)


class _Teller(Progress):
    """The runner's progress, told to the client as Dask events instead of on a stream:
    each run's start and end with its sequence number, time and key figure."""

    def __init__(self, job: SeedJob[Any], place: Place) -> None:
        super().__init__(None, job.experiment, [Step(str(job.seed))])
        self.job = job
        self.place = place
        self._began: dict[int, float] = {}

    def event(self, kind: str, **fields: object) -> None:
        message = {
            "sweep": self.job.sweep,
            "kind": kind,
            "seed": self.job.seed,
            "machine": self.place.machine,
            "worker": self.place.worker,
            **fields,
        }
        get_worker().log_event(TOPIC, message)

    def step_began(self, index: int) -> None:
        self._began[index] = time.monotonic()
        self.event("began", index=index)

    def step_ended(self, index: int, figure: str) -> None:
        took = time.monotonic() - self._began.pop(index, time.monotonic())
        self.event("ended", index=index, took_s=took, figure=figure)
