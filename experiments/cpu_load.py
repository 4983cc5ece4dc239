"""A run's CPU load as its record holds it: each core's busy share over the run's window and
who took the time (the run's own processes, kernel threads, background work, the machine's
other processes), from the readings :mod:`experiments.cpu` takes before and after a run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from experiments.cpu import CoreTimes, ProcessTimes, core_jiffies, core_load, process_load


@dataclass(frozen=True)
class CoreShare:
    """One core's shares of the window (0..1): busy, and of the time, softirq, steal and
    background (nice) work."""

    busy: float
    softirq: float
    steal: float
    nice: float


@dataclass(frozen=True)
class OtherProcess:
    """A process outside the run that took CPU over the window, in cores."""

    pid: int
    command: str
    cores: float


@dataclass(frozen=True)
class ProcessShare:
    """Cores' worth of CPU over the window (1.0: one core all the window) by who took it."""

    run_cores: float
    kernel_threads_cores: float
    background_cores: float
    others_cores: float
    top_others: tuple[OtherProcess, ...]


@dataclass(frozen=True)
class CpuLoad:
    """Each core's shares, the busiest core's busy share and the mean over cores (None
    without a core read in both readings), the load average at the end, and who took it
    (None where the processes were not read)."""

    cores: Mapping[str, CoreShare]
    busiest_core: float | None
    busy_fraction: float | None
    cpus: int
    loadavg_1min: float
    processes: ProcessShare | None = None


def cpu_load(
    cores_before: Mapping[str, CoreTimes],
    cores_after: Mapping[str, CoreTimes],
    processes_before: Mapping[int, ProcessTimes],
    processes_after: Mapping[int, ProcessTimes],
    root: int,
) -> CpuLoad:
    """The load between two readings; ``root`` is the process whose descendants are the
    run's own (the runner: the controller, the switches and the agents are its children)."""
    load = core_load(cores_before, cores_after)
    taken = process_load(
        processes_before, processes_after, core_jiffies(cores_before, cores_after), root
    )
    return CpuLoad(
        cores={name: CoreShare(**share) for name, share in load["cores"].items()},
        busiest_core=load["busiest_core"],
        busy_fraction=load["busy_fraction"],
        cpus=load["cpus"],
        loadavg_1min=load["loadavg_1min"],
        processes=ProcessShare(
            run_cores=taken["run_cores"],
            kernel_threads_cores=taken["kernel_threads_cores"],
            background_cores=taken["background_cores"],
            others_cores=taken["others_cores"],
            top_others=tuple(OtherProcess(**other) for other in taken["top_others"]),
        ),
    )
