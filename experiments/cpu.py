"""How busy the machine's CPUs were over an interval (``/proc/stat``), to show whether the
links or the CPUs limited a measurement: BMv2 and the agents share a few cores."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CpuTimes:
    """Aggregate CPU jiffies since boot: busy and total."""

    busy: int
    total: int


def cpu_times() -> CpuTimes:
    """The first (all-CPU) line of /proc/stat; idle and iowait count as not busy."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
    idle = values[3] + values[4]
    return CpuTimes(busy=sum(values) - idle, total=sum(values))


def cpu_load(start: CpuTimes, end: CpuTimes) -> dict[str, float]:
    """Busy share of all CPUs between two readings (0..1), the CPU count, and the load
    average at the end."""
    total = end.total - start.total
    return {
        "busy_fraction": (end.busy - start.busy) / total if total > 0 else 0.0,
        "cpus": float(os.cpu_count() or 1),
        "loadavg_1min": os.getloadavg()[0],
    }
