"""What summary.json holds, as the runner assembles it: the run's setting (experiment,
target and what it can do, topology files, seeds, modes and their order, versions,
parameters), every run, the experiment's figures, what limited the runs, the invariants, and
each bring-up's account. :func:`experiments.results.summary_problems` is the check of the
written file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic

from experiments.bottleneck import OverallBottleneck
from experiments.capabilities import TargetFacts
from experiments.experiment import F, M, P, R
from experiments.invariants import Invariants
from experiments.json_form import FLAT, OMIT_NONE, TEXT
from experiments.records import Runs


@dataclass(frozen=True)
class TopologyFiles(Generic[M]):
    """The topology asked for (a preset or a file), its name, and the file each mode's
    network was brought up from (in the results directory); ``file`` is the first mode's."""

    ref: str
    name: str
    file: str
    files: Mapping[M, str]


@dataclass(frozen=True)
class Order:
    """How the modes' order is chosen, and each seed's modes by label, in the order they ran."""

    rule: str
    per_seed: Mapping[str, list[str]]


@dataclass(frozen=True)
class BringUpAccount:
    """One bring-up: its topology file, the runs it served (``seed/mode``), the controller's
    event log copied beside the results (None: none was written), the routing policy and path
    mode it ran, and what its teardown left."""

    topology: str
    runs: tuple[str, ...]
    controller_events: str | None
    routing: str
    path_mode: str
    teardown: str


@dataclass(frozen=True)
class Bottlenecks(Generic[M]):
    """What limited the runs: per mode, and over all of them."""

    per_mode: Mapping[M, OverallBottleneck] = field(metadata=FLAT)
    all: OverallBottleneck


@dataclass(frozen=True)
class SeedPlace:
    """Where one seed ran on a cluster: the machine (its host name), the worker's address,
    how many times a worker started it (1 unless a worker was lost mid-run), and the
    machine's versions (its tree matched the client's commit, its tools may differ)."""

    machine: str
    worker: str
    attempts: int
    versions: Mapping[str, str]


@dataclass(frozen=True)
class Rerun:
    """A seed started again on another worker: the worker lost, how many of the seed's runs
    it had finished (dropped with the rest of its partial run), and why."""

    seed: int
    lost_worker: str
    lost_machine: str
    runs_dropped: int
    why: str


@dataclass(frozen=True)
class ClusterAccount:
    """How a cluster ran the seeds: the scheduler, each seed's place (by seed), the reruns,
    and what the fan-out cost: seconds from submitting each seed to its first run starting,
    bytes and seconds of each result coming back (by seed)."""

    scheduler: str
    seeds: Mapping[int, SeedPlace]
    reruns: tuple[Rerun, ...]
    task_start_s: Mapping[int, float]
    result_bytes: Mapping[int, int]
    result_transfer_s: Mapping[int, float]

    def lines(self) -> list[str]:
        """summary.txt's account of the cluster: each seed's machine, each rerun."""
        where = ", ".join(
            f"seed {seed} on {place.machine}" for seed, place in sorted(self.seeds.items())
        )
        return [
            f"cluster {self.scheduler}: {where}",
            *(
                f"seed {rerun.seed} rerun: {rerun.why}"
                for rerun in sorted(self.reruns, key=lambda rerun: rerun.seed)
            ),
        ]


@dataclass(frozen=True)
class Summary(Generic[P, M, R, F]):
    """summary.json."""

    experiment: str
    target: str
    target_facts: TargetFacts
    topology: TopologyFiles[M]
    seeds: int
    modes: tuple[M, ...] = field(metadata=TEXT)
    order: Order
    versions: Mapping[str, str]
    parameters: P
    runs: Runs[M, R]
    figures: F
    bottleneck: Bottlenecks[M]
    invariants: Invariants[M]
    controller_discovery: bool
    bring_ups: tuple[BringUpAccount, ...]
    teardown: str
    pngs: tuple[str, ...]
    #: Where the seeds ran when a cluster ran them (``--cluster``); absent from a local run's.
    cluster: ClusterAccount | None = field(default=None, metadata=OMIT_NONE)
