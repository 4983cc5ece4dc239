"""What a seed's task gets (:class:`SeedJob`) and gives back (:class:`SeedResult`, or
:class:`SeedFailed` for a run that raised, or :class:`Refused` from a worker whose tree is
not the client's), and the events it tells the client as it goes (:data:`TOPIC`).

Everything here is plain data that pickles: the task finds the experiment by its name and
writes the topology files from their text, so that nothing of the client's machine (a path,
an experiment's functions) has to exist on the worker's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic

from experiments.capabilities import TargetFacts
from experiments.experiment import M, R, S
from experiments.runner import Measured
from experiments.topology_variant import Variant

#: The Dask event topic a task tells its seed's start and each run's start and end on
#: (``Worker.log_event``; the client subscribes); each event names its sweep.
TOPIC = "mrc-experiment-runs"


@dataclass(frozen=True)
class SeedJob(Generic[M]):
    """One seed of a sweep: the experiment (by name) and its parameters, the target and
    path mode, each bring-up's topology variant by file suffix, the topology files by name
    with their text and the file each mode runs on, the seed and the number of runs before
    it (its runs' first sequence number), the client's tree
    (:func:`~experiments.cluster.tree.tree_identity`), and the sweep's id (which the events
    carry)."""

    experiment: str
    params: Any
    target: str
    path_mode: str | None
    variants: Mapping[str, Variant]
    topology_texts: Mapping[str, str]
    mode_files: Mapping[M, str]
    seed: int
    first_sequence: int
    tree: str
    sweep: str
    #: Whether each bring-up runs a backup controller (``Testbed(backup=True)``).
    backup: bool = False


@dataclass(frozen=True)
class Place:
    """Where a task ran: the worker's name (its machine) and address."""

    machine: str
    worker: str


@dataclass(frozen=True)
class SeedResult(Generic[M, R, S]):
    """A seed's runs made: where, with the machine's target facts and versions, the runs,
    series and bring-up accounts, and each bring-up's controller event log by the name the
    worker gave it."""

    seed: int
    place: Place
    facts: TargetFacts
    versions: Mapping[str, str]
    measured: Measured[M, R, S]
    event_logs: Mapping[str, str]


@dataclass(frozen=True)
class SeedFailed:
    """A seed whose runs raised on the worker (not a lost worker: the run itself failed),
    with the error: a result, never retried."""

    seed: int
    place: Place
    error: str


@dataclass(frozen=True)
class Refused:
    """A worker whose tree is not the client's refused the seed; ``message`` names both."""

    seed: int
    place: Place
    message: str


def refusal(place: Place, seed: int, worker_tree: str, client_tree: str) -> Refused:
    """The refusal of a worker at ``worker_tree`` given a seed by a client at ``client_tree``."""
    return Refused(
        seed,
        place,
        f"worker {place.machine} ({place.worker}) refuses seed {seed}: its tree is at "
        f"{worker_tree}, the client's at {client_tree}; check out the client's commit there "
        "(without local changes) and start the worker again",
    )


class ClusterRunFailed(RuntimeError):
    """The sweep could not complete on the cluster: no scheduler to connect to, a refusal, a
    failed run, a task whose workers kept dying; the message says which seed, where and why.
    Here, apart from Dask, so that ``python -m experiments`` can catch it without importing
    Dask on a local run."""


#: What a task gives back.
Outcome = SeedResult[Any, Any, Any] | SeedFailed | Refused
