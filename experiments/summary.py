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
from experiments.json_form import FLAT, TEXT
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
