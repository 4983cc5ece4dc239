"""What an experiment module provides to the runner (:mod:`experiments.runner`).

An experiment is a set of functions over typed values: its parameters (a frozen dataclass
whose fields ``--set name=value`` sets), its modes (a typed value each: a transport, a
routing policy, a placement, a loss rate, whatever it varies; ``str(mode)`` is the mode's
label in summary.json, file names and figures), its record of one run (a frozen dataclass
with the run's ``transfers``), the time series of a run, and its figures over every mode and
seed (a frozen dataclass). The runner brings the network up, calls ``run_mode`` for every
seed and mode, then ``summarize``, ``draw`` and ``text``, and writes the results directory;
every experiment thereby gets the same teardown, the same summary.json skeleton and the same
checks.

The modes depend on the parameters (``modes_of``: failover's transports x routing policies x
placements). Some modes' transfers may fail as a result (``may_fail``: a RoCE QP out of
retries): the invariants (:mod:`experiments.invariants`) then ask of them only that a
failure is recorded with its error and that a transfer that did complete lost nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeAlias, TypeVar

from experiments.capabilities import TargetFacts
from experiments.headlines import transfers_headline
from experiments.records import RunRecord, Runs
from experiments.topology_variant import Variant
from testbed.session import Testbed
from topologies.model import Topology


class Parameters(Protocol):
    """An experiment's parameters: a dataclass whose every field has a default (the
    experiment's defaults), with a check of the whole."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[object]]]

    def check(self) -> None:
        """ValueError for settings that cannot work."""


P = TypeVar("P", bound=Parameters)
M = TypeVar("M", bound=Hashable)
R = TypeVar("R", bound=RunRecord)
S = TypeVar("S")
F = TypeVar("F")


def _never(mode: object) -> bool:
    del mode
    return False


def _unplanned(params: object, mode: object) -> float | None:
    del params, mode
    return None


@dataclass(frozen=True)
class Experiment(Generic[P, M, R, S, F]):
    """One experiment: its defaults and the functions the runner calls, over its parameters
    ``P``, modes ``M``, run records ``R``, time series ``S`` and figures ``F``."""

    name: str
    default_topology: str
    params_type: type[P]
    #: The modes every seed runs in, for the parameters (in this order on even seeds,
    #: reversed on odd ones: see :func:`experiments.plan.run_order`).
    modes_of: Callable[[P], tuple[M, ...]]
    #: The topology changes a mode needs.
    variant: Callable[[P, M], Variant]
    #: One run of a mode and seed: its record and its time series.
    run_mode: Callable[[Testbed, P, M, int], tuple[R, S]]
    #: The figures over every mode and seed, given what the target can do (a comparison the
    #: target cannot make is reported as not applicable, never as a ratio).
    summarize: Callable[[Runs[M, R], TargetFacts], F]
    #: The PNG figures of the runs and time series, written into the directory; their names.
    draw: Callable[[Path, Runs[M, R], Mapping[M, Mapping[int, S]], P], list[str]]
    #: summary.txt's lines for the figures.
    text: Callable[[F], list[str]]
    #: Whether the controller runs LLDP discovery (off where links are slowed: see Testbed).
    discovery: bool = True
    #: Whether every bring-up runs a backup controller (``testbed.controllers``; the runner's
    #: ``backup`` adds one to any experiment).
    backup: bool = False
    #: What the experiment needs of the topology (hosts it names, links its flows share):
    #: a ValueError saying what is wrong, raised before anything is brought up.
    check_topology: Callable[[Topology, P], None] | None = None
    #: Modes whose transfers may fail as a result rather than an error.
    may_fail: Callable[[M], bool] = _never
    #: A run's key figure in a few words, for its progress line (:mod:`experiments.headlines`;
    #: by default its transfers' goodput and any failure).
    headline: Callable[[R], str] = transfers_headline
    #: How long a run of the mode lasts by the parameters (its transfers' ``duration_s``), for
    #: the time left (:mod:`experiments.progress.estimate`); None where only the runs made
    #: can tell (a job of so many iterations, a transfer of so many bytes).
    planned_s: Callable[[P, M], float | None] = _unplanned


#: An experiment of any parameters, modes, records, series and figures (the registry's).
AnyExperiment: TypeAlias = Experiment[Any, Any, Any, Any, Any]


def parse_params(experiment: Experiment[P, M, R, S, F], settings: Mapping[str, str]) -> P:
    """The experiment's parameters with ``settings`` (field name -> text) applied; ValueError
    for an unknown field or a value of the wrong type."""
    fields = {f.name: f for f in dataclasses.fields(experiment.params_type)}
    defaults = experiment.params_type()
    values: dict[str, object] = {}
    for key, text in settings.items():
        if key not in fields:
            raise ValueError(
                f"{experiment.name} has no parameter {key!r}; parameters: {', '.join(fields)}"
            )
        default = getattr(defaults, key)
        try:
            values[key] = _parse_value(default, text)
        except ValueError:
            raise ValueError(f"{key}={text!r}: expected {type(default).__name__}") from None
    params = experiment.params_type(**values)
    params.check()
    return params


def _parse_value(default: object, text: str) -> object:
    """``text`` as the type of ``default`` (bool accepts true/false, yes/no, on/off, 1/0)."""
    if isinstance(default, bool):
        lowered = text.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValueError(text)
    if not isinstance(default, int | float | str):
        raise TypeError(f"a parameter of type {type(default).__name__} takes no --set")
    return type(default)(text)
