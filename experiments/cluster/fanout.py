"""The client's side of a sweep on a cluster: every seed one Dask task needing one ``fabric``
resource (a worker offers one, so a machine runs one emulation at a time), the runs told as
the tasks tell them, the results merged as a local run's (:mod:`experiments.cluster.merge`)
and written with the figures drawn here (:func:`experiments.runner.write_results`).

A worker lost mid-run (its process or machine gone) has its task given to another worker by
the scheduler, at most ``distributed.scheduler.allowed-failures`` times (the scheduler's
setting; ``python -m experiments.cluster scheduler`` sets it), after which the sweep stops
with Dask's ``KilledWorker``. The lost worker's partial run is never merged: only a finished
task returns a result. A run that raised comes back as a result and stops the sweep with its
error; a worker whose tree is not the client's refuses its seed, which stops it too.
"""

from __future__ import annotations

import pickle
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distributed import Client, as_completed

from experiments.cluster.entry import run_seed
from experiments.cluster.job import (
    ClusterRunFailed,
    Outcome,
    Refused,
    SeedFailed,
    SeedJob,
    SeedResult,
)
from experiments.cluster.merge import merge
from experiments.cluster.progress import TOPIC, ClusterProgress
from experiments.cluster.tree import tree_identity
from experiments.experiment import Experiment, F, M, P, R, S
from experiments.progress import Display
from experiments.runner import prepare, write_results
from experiments.summary import ClusterAccount, SeedPlace

__all__ = ["ClusterRunFailed", "run_on_cluster"]

#: Seconds the client waits for the scheduler to answer.
CONNECT_TIMEOUT_S = 30


def run_on_cluster(
    experiment: Experiment[P, M, R, S, F],
    *,
    address: str,
    topology_ref: str | None,
    target: str,
    seeds: int,
    params: P,
    results_root: Path,
    path_mode: str | None = None,
    progress: Display | None = None,
    backup: bool = False,
) -> Path:
    """Run every seed on the cluster at ``address``; write and return the results directory,
    as :func:`experiments.runner.run_experiment` does for a local run, with summary.json's
    ``cluster`` saying which machine ran which seed and which seeds were rerun, and why."""
    prepared = prepare(experiment, topology_ref, seeds, params, results_root)
    modes = experiment.modes_of(params)
    sweep = uuid.uuid4().hex[:12]
    texts = {path.name: path.read_text() for path in set(prepared.files.values())}
    tree = tree_identity()
    jobs = [
        SeedJob(
            experiment=experiment.name,
            params=params,
            target=target,
            path_mode=path_mode,
            variants=prepared.variants,
            topology_texts=texts,
            mode_files={mode: path.name for mode, path in prepared.files.items()},
            seed=seed,
            first_sequence=seed * len(modes),
            tree=tree,
            sweep=sweep,
            backup=backup or experiment.backup,
        )
        for seed in range(seeds)
    ]
    told = ClusterProgress(progress, experiment.name, prepared.steps, sweep)
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as error:
        raise ClusterRunFailed(f"no scheduler to connect to: {error}") from error
    with client:
        client.subscribe_topic(TOPIC, told.event)
        told.plan(address, seeds, len(client.scheduler_info()["workers"]))
        submitted: dict[int, float] = {}
        futures = {}
        for job in jobs:
            submitted[job.seed] = time.monotonic()
            future = client.submit(
                run_seed,
                job.tree,
                sweep,
                job.seed,
                pickle.dumps(job, protocol=5),
                key=f"{experiment.name}-seed{job.seed}-{sweep}",
                resources={"fabric": 1},
                pure=False,
            )
            futures[future] = job.seed
        results: list[SeedResult[Any, Any, Any]] = []
        result_bytes: dict[int, int] = {}
        result_s: dict[int, float] = {}
        try:
            for future in as_completed(futures):
                began = time.monotonic()
                seed = futures[future]
                try:
                    outcome: Outcome = future.result()
                except Exception as error:  # KilledWorker: too many workers lost
                    raise ClusterRunFailed(f"seed {seed}: {error}") from error
                # Released once read: a finished task whose future is held keeps its result
                # on its worker, and were that worker lost, the scheduler would run the
                # seed again.
                del futures[future]
                future.release()
                result_s[seed] = time.monotonic() - began
                result_bytes[seed] = len(pickle.dumps(outcome, protocol=5))
                if isinstance(outcome, Refused):
                    raise ClusterRunFailed(outcome.message)
                if isinstance(outcome, SeedFailed):
                    raise ClusterRunFailed(
                        f"seed {outcome.seed} failed on {outcome.place.machine}:\n{outcome.error}"
                    )
                told.taken(outcome.seed, outcome.place.worker)
                results.append(outcome)
        except BaseException:
            client.cancel(list(futures))
            told.final("stopped")
            raise
        told.settle(len(prepared.steps))
        gone = _gone(client, told)
    told.final()
    measured = merge(experiment, params, results, prepared.directory)
    account = ClusterAccount(
        scheduler=address,
        seeds={
            result.seed: SeedPlace(
                machine=result.place.machine,
                worker=result.place.worker,
                attempts=told.attempts.count(result.seed),
                versions=result.versions,
            )
            for result in sorted(results, key=lambda result: result.seed)
        },
        reruns=told.attempts.reruns(len(modes), gone),
        task_start_s=_task_start(submitted, told.seed_started_at),
        result_bytes=dict(sorted(result_bytes.items())),
        result_transfer_s=dict(sorted(result_s.items())),
    )
    facts = min(results, key=lambda result: result.seed).facts
    return write_results(experiment, prepared, target, params, facts, measured, account)


def _gone(client: Client, told: ClusterProgress) -> set[str]:
    """The workers that started a seed and are no longer in the cluster."""
    present = set(client.scheduler_info(n_workers=-1)["workers"])
    started = {a.worker for attempts in told.attempts.by_seed.values() for a in attempts}
    return started - present


def _task_start(submitted: Mapping[int, float], started: Mapping[int, float]) -> dict[int, float]:
    """Seconds from submitting each seed to its task telling that it started (the first
    attempt's), by seed."""
    return {
        seed: round(started[seed] - submitted[seed], 4)
        for seed in sorted(submitted)
        if seed in started
    }
