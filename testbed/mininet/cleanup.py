"""Remove everything a run left on the machine, found by its prefix alone (``mn -c`` style).

A run's own teardown ends with this sweep, and so does ``python -m testbed.mininet clean``
for runs whose owner died (``kill -9``, a crashed test): processes inside the run's named
namespaces (host shells, anything started on a host), processes whose command line names the
run's interfaces (BMv2), the run's root-namespace veths, then the namespaces themselves.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass

from testbed.mininet.naming import check_run_prefix, run_of
from testbed.mininet.runs import process_start_time, recorded_runs, runs_root
from testbed.mininet.system import (
    delete_netns,
    delete_root_link,
    kill_now,
    list_netns,
    list_root_links,
    netns_pids,
    processes_naming,
)


@dataclass(frozen=True)
class Leftovers:
    """What of a run is still on the machine."""

    namespaces: tuple[str, ...]
    links: tuple[str, ...]
    processes: tuple[int, ...]

    @property
    def empty(self) -> bool:
        """True when nothing of the run is left."""
        return not (self.namespaces or self.links or self.processes)

    def __str__(self) -> str:
        if self.empty:
            return "nothing left"
        return (
            f"namespaces {list(self.namespaces)}, links {list(self.links)}, "
            f"processes {list(self.processes)}"
        )


def leftovers(prefix: str) -> Leftovers:
    """The run's namespaces, root-namespace links and processes that still exist."""
    check_run_prefix(prefix)
    namespaces = tuple(name for name in list_netns() if run_of(name) == prefix)
    processes = set(processes_naming(f"{prefix}-"))
    for namespace in namespaces:
        processes.update(netns_pids(namespace))
    return Leftovers(
        namespaces=namespaces,
        links=tuple(name for name in list_root_links() if run_of(name) == prefix),
        processes=tuple(sorted(processes)),
    )


def sweep(prefix: str, timeout: float = 5.0) -> Leftovers:
    """Kill and delete everything of the run; returns what is left after ``timeout`` seconds
    of retrying (empty unless something refuses to go)."""
    deadline = time.monotonic() + timeout
    while True:
        left = leftovers(prefix)
        if left.empty or time.monotonic() >= deadline:
            return left
        for pid in left.processes:
            kill_now(pid)
        # Deleting a veth end takes its peer along, inside a namespace or not.
        for link in left.links:
            delete_root_link(link)
        for namespace in left.namespaces:
            delete_netns(namespace)
        time.sleep(0.05)


def prefixes_on_machine() -> set[str]:
    """Every run prefix that has a namespace, root link or owner record on this machine."""
    found = {run_of(name) for name in list_netns() + list_root_links()}
    found.update(recorded_runs(runs_root()))
    return {prefix for prefix in found if prefix is not None}


def stale_prefixes() -> set[str]:
    """Runs whose owner is gone: left over from a crash, safe to sweep."""
    records = recorded_runs(runs_root())
    return {
        prefix
        for prefix in prefixes_on_machine()
        if prefix not in records or not records[prefix].owner_alive
    }


def sweep_dead_runs() -> dict[str, Leftovers]:
    """Sweep every run recorded under this machine's runs root whose owner is dead (a
    runner killed with SIGKILL), and remove its record; what was left of each, by prefix.
    Runs of live owners, and runs recorded under other roots, are not touched: on a shared
    machine they are someone else's."""
    swept: dict[str, Leftovers] = {}
    root = runs_root()
    for prefix, record in recorded_runs(root).items():
        if record.owner_alive:
            continue
        swept[prefix] = sweep(prefix)
        shutil.rmtree(root / prefix, ignore_errors=True)
    return swept


def sweep_own_runs() -> dict[str, Leftovers]:
    """Sweep every run recorded under this machine's runs root whose owner is this process
    (the same pid and start time), and remove its record; what was left of each, by prefix.
    For a process about to exit with a run's thread still going (a cluster's worker stopped
    mid-seed), whose teardown would otherwise never run."""
    swept: dict[str, Leftovers] = {}
    root = runs_root()
    me, started = os.getpid(), process_start_time(os.getpid())
    for prefix, record in recorded_runs(root).items():
        if record.owner_pid != me or record.owner_start_time != started:
            continue
        swept[prefix] = sweep(prefix)
        shutil.rmtree(root / prefix, ignore_errors=True)
    return swept
