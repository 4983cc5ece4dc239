"""How busy each of the machine's CPU cores was over an interval (``/proc/stat``), to show
whether the links or the CPUs limited a measurement: BMv2, the kernel's forwarding and the
agents share a few cores.

A core counts as busy for every jiffy it ran something at normal or higher priority, and for
every jiffy the hypervisor stole (``steal``): a core the hypervisor took was as unavailable to
the run as one the run used. Idle and I/O wait are not busy, and neither is ``nice`` time
(processes at a background priority, nice > 0, such as a compiler built at ``nice 10``): they
yield the core to the run's normal-priority processes whenever those want it, so they did not
limit the run; their share is recorded as ``nice`` beside the busy share, as are ``steal`` and
``softirq`` (where the kernel switches forward), so that a reader can tell who took the time.
The saturation verdict is per core, not over all cores: one core pinned by a single-threaded
switch or agent limits a run while the machine average still looks half idle. The reading
itself is ``hostenv.proc_stat``'s; the busy rule above is the experiments' own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostenv.proc_stat import CoreJiffies, parse_proc_stat, read_proc_stat


@dataclass(frozen=True)
class CoreTimes:
    """One core's jiffies since boot: busy (not idle, iowait or nice), of which softirq and
    steal; nice (background priority); and the total."""

    busy: int
    softirq: int
    steal: int
    total: int
    nice: int = 0

    @classmethod
    def of(cls, jiffies: CoreJiffies) -> CoreTimes:
        """A core's reading by the busy rule above."""
        total = jiffies.total
        return cls(
            busy=total - jiffies.idle - jiffies.iowait - jiffies.nice,
            softirq=jiffies.softirq,
            steal=jiffies.steal,
            total=total,
            nice=jiffies.nice,
        )


def _by_name(cores: Mapping[int, CoreJiffies]) -> dict[str, CoreTimes]:
    return {f"cpu{number}": CoreTimes.of(jiffies) for number, jiffies in cores.items()}


def parse_stat(text: str) -> dict[str, CoreTimes]:
    """Every core of a /proc/stat text by name (``cpu0``, ``cpu1``, ...)."""
    return _by_name(parse_proc_stat(text))


def core_times() -> dict[str, CoreTimes]:
    """Every core's jiffies now, by name."""
    return _by_name(read_proc_stat())


def core_load(start: Mapping[str, CoreTimes], end: Mapping[str, CoreTimes]) -> dict[str, Any]:
    """Each core's busy share between two readings (0..1), its softirq, steal and nice
    shares, the busiest core's share, the mean over cores, and the load average at the end.
    A core present in only one reading (hot-plugged) is left out."""
    cores: dict[str, dict[str, float]] = {}
    for name in sorted(start.keys() & end.keys(), key=_core_number):
        total = end[name].total - start[name].total
        if total <= 0:
            cores[name] = {"busy": 0.0, "softirq": 0.0, "steal": 0.0, "nice": 0.0}
            continue
        cores[name] = {
            "busy": (end[name].busy - start[name].busy) / total,
            "softirq": (end[name].softirq - start[name].softirq) / total,
            "steal": (end[name].steal - start[name].steal) / total,
            "nice": (end[name].nice - start[name].nice) / total,
        }
    busy = [core["busy"] for core in cores.values()]
    return {
        "cores": cores,
        "busiest_core": max(busy) if busy else None,
        "busy_fraction": sum(busy) / len(busy) if busy else None,
        "cpus": len(cores),
        "loadavg_1min": os.getloadavg()[0],
    }


def core_jiffies(start: Mapping[str, CoreTimes], end: Mapping[str, CoreTimes]) -> float:
    """One core's jiffies between two readings (the mean over the cores in both)."""
    names = start.keys() & end.keys()
    if not names:
        return 0.0
    return sum(end[name].total - start[name].total for name in names) / len(names)


def _core_number(name: str) -> int:
    digits = name.removeprefix("cpu")
    return int(digits) if digits.isdigit() else -1


@dataclass(frozen=True)
class ProcessTimes:
    """One process's CPU jiffies since it started (user and system), its parent, and its
    command line (shortened), for telling the run's own load from the machine's other load.
    Only a process's own time counts: the time of children it reaped (``cutime``) would land
    whole in the window in which they ended, however long they ran before it; a process
    that starts and ends within a window is missed, which for the testbed's long-lived
    switches, controller and agents loses little."""

    ppid: int
    jiffies: int
    command: str
    #: Its nice value: above 0 it runs at background priority and yields to the run.
    nice: int = 0


#: Processes listed by name among those outside the run that took CPU over a window.
TOP_OTHERS = 3
#: A command line is cut to this many characters in a record.
COMMAND_CHARS = 80
#: The kernel's thread parent: its children are kernel threads, not processes of anyone's.
KTHREADD_PID = 2


def process_times(proc: Path = Path("/proc")) -> dict[int, ProcessTimes]:
    """Every process's jiffies now (a process that ends while being read is left out)."""
    processes: dict[int, ProcessTimes] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        # the command name in parentheses may hold spaces: the fields follow its last ')'
        name_end = stat.rindex(")")
        fields = stat[name_end + 2 :].split()
        processes[int(entry.name)] = ProcessTimes(
            ppid=int(fields[1]),
            jiffies=int(fields[11]) + int(fields[12]),  # utime, stime
            command=(command.strip() or stat[stat.index("(") : name_end + 1])[:COMMAND_CHARS],
            nice=int(fields[16]),
        )
    return processes


def process_load(
    start: Mapping[int, ProcessTimes],
    end: Mapping[int, ProcessTimes],
    core_jiffies: float,
    root: int,
) -> dict[str, Any]:
    """Cores' worth of CPU (1.0: one core all the window; ``core_jiffies`` is one core's
    jiffies over the window) taken by the run (``root`` and its descendants: the controller,
    the switches, the agents), by kernel threads, by other processes at background priority
    (nice > 0: they yield to the run), and by every other process, with the busiest of those
    by command line. Time spent in softirq on behalf of a process's packets is not a
    process's: the cores' ``softirq`` share counts it."""
    ours = _descendants(end, root)
    taken = {"run": 0.0, "kernel_threads": 0.0, "background": 0.0, "others": 0.0}
    others: list[tuple[float, int]] = []
    for pid, now in end.items():
        then = start.get(pid)
        used = now.jiffies - (then.jiffies if then is not None and then.ppid == now.ppid else 0)
        cores = used / core_jiffies if core_jiffies > 0 else 0.0
        if pid in ours:
            taken["run"] += cores
        elif now.ppid == KTHREADD_PID or pid == KTHREADD_PID:
            taken["kernel_threads"] += cores
        elif now.nice > 0:
            taken["background"] += cores
        else:
            taken["others"] += cores
            others.append((cores, pid))
    top = sorted(others, reverse=True)[:TOP_OTHERS]
    return {
        **{f"{name}_cores": value for name, value in taken.items()},
        "top_others": [
            {"pid": pid, "command": end[pid].command, "cores": cores}
            for cores, pid in top
            if cores > 0
        ],
    }


def _descendants(processes: Mapping[int, ProcessTimes], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, process in processes.items():
        children.setdefault(process.ppid, []).append(pid)
    found, pending = {root}, [root]
    while pending:
        for child in children.get(pending.pop(), ()):
            if child not in found:
                found.add(child)
                pending.append(child)
    return found
