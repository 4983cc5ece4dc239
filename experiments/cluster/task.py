"""A seed's runs on a worker: the function each Dask task calls.

It first tells the client that the seed started here (so the client can time the task's
start and see a seed started again elsewhere: a rerun), refuses the seed when the tree the
worker's code was loaded from (:func:`loaded_tree`, taken at the worker's start) is not the
client's or its tree has changed since, before unpickling the job (a class the job holds may
have moved at another commit), then unpickles the job, writes the topology files into a
directory of its own, brings up and runs the seed's modes in the seed's order
(:func:`experiments.plan.plan_seed`, :func:`experiments.runner.measure`), telling each run's
start and end, and gives back what a local run would have kept of them. A run that raises
comes back as :class:`SeedFailed`, a result: Dask reruns a task only when its worker is lost,
never because the run failed.
"""

from __future__ import annotations

import functools
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


def run_seed(client_tree: str, sweep: str, seed: int, pickled_job: bytes) -> Outcome:
    """The seed's runs, or why they were not made (see the module's docstring); the client's
    tree, the sweep and seed as plain values, checked before the job (pickled, see
    :mod:`experiments.cluster.entry`) is unpickled."""
    worker = get_worker()
    place = Place(machine=str(worker.name), worker=worker.address)
    tell = _Teller(sweep, seed, place)
    tell.event("seed")
    loaded = loaded_tree()
    if loaded != client_tree:
        return refusal(place, seed, loaded, client_tree)
    now = tree_identity()
    if now != loaded:
        return refusal(place, seed, f"{now} (it started at {loaded})", client_tree)
    job = _load_job(pickled_job)
    try:
        return _measure_seed(job, place, tell)
    except Exception:  # the run failed: a result to report, not a worker to replace
        return SeedFailed(job.seed, place, traceback.format_exc())


def _load_job(pickled_job: bytes) -> SeedJob[Any]:
    job: SeedJob[Any] = pickle.loads(pickled_job)
    return job


@functools.cache
def loaded_tree() -> str:
    """The tree this worker's code was loaded from: taken once, when the worker starts
    (``python -m experiments.cluster worker`` calls this before it joins), so that a tree
    changed under a running worker is not taken for the code it runs."""
    return tree_identity()


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

    def __init__(self, sweep: str, seed: int, place: Place) -> None:
        super().__init__(None, "", [Step(str(seed))])
        self.sweep = sweep
        self.seed = seed
        self.place = place
        self._began: dict[int, float] = {}

    def event(self, kind: str, **fields: object) -> None:
        message = {
            "sweep": self.sweep,
            "kind": kind,
            "seed": self.seed,
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
