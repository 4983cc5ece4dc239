"""Runs as the runner hands them to an experiment's ``summarize``, built for the tests: a
record with what the runner measured around it (CPU, links, verdict, place in the order),
and transfers as the experiments record them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from experiments.bottleneck import NEITHER, RunBottleneck
from experiments.cpu_load import CpuLoad
from experiments.records import Failure, Run, RunRecord, Transfer

R = TypeVar("R", bound=RunRecord)


def cpu(busiest_core: float | None, busy_fraction: float | None = None) -> CpuLoad:
    """A CPU load of which only the busiest core and the mean over cores are known."""
    return CpuLoad(
        cores={},
        busiest_core=busiest_core,
        busy_fraction=busy_fraction,
        cpus=0,
        loadavg_1min=0.0,
    )


def run_verdict(name: str, core: float | None = 0.5, link: float | None = 0.5) -> RunBottleneck:
    """A run's verdict with its busiest core and link."""
    return RunBottleneck(
        verdict=name,
        busiest_core=core,
        busiest_link=None,
        busiest_link_utilisation=link,
        links_unread=0,
        other_processes_cores=None,
        busiest_other_process=None,
    )


def measured(
    record: R,
    sequence: int = 0,
    bottleneck: RunBottleneck | None = None,
    load: CpuLoad | None = None,
) -> Run[R]:
    """``record`` as the runner hands it on: the ``sequence``-th run, with its verdict."""
    return Run(
        record=record,
        window_s=1.0,
        cpu=load or cpu(0.5, 0.5),
        link_utilisation={},
        bottleneck=bottleneck or run_verdict(NEITHER),
        sequence=sequence,
    )


def transfer(
    completed: bool = True,
    lost: int | None = 0,
    goodput_bps: float = 8e6,
    failure: Failure | None = None,
) -> Transfer:
    """A transfer that delivered what it sent but ``lost`` bytes, or failed."""
    return Transfer(
        bytes_sent=None if lost is None else 1000,
        bytes_delivered=None if lost is None else 1000 - lost,
        bytes_lost=lost,
        completed=completed,
        goodput_bps=goodput_bps,
        retransmits={},
        failure=failure,
    )


@dataclass(frozen=True)
class Transfers:
    """A run record that is only its transfers."""

    transfers: Mapping[str, Transfer]
