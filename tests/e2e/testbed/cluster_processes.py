"""A Dask scheduler and workers as separate processes, standing for machines, for the tests of
sweeps on a cluster: each in a network namespace of its own on a LAN
(:mod:`tests.e2e.testbed.cluster_lan`), each in a session of its own (so that killing one takes
its whole process group, as losing a machine would), its output in a log file;
:meth:`Cluster.close` ends every one of them, whatever the test did."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e.testbed.cluster_lan import Lan

REPO = Path(__file__).resolve().parents[3]
#: How long a scheduler or worker may take to say it is up on a busy two-core machine.
START_TIMEOUT_S = 120.0


@dataclass
class Cluster:
    """The processes started for one test, and where their logs go."""

    logs: Path
    lan: Lan
    address: str = ""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start_scheduler(self) -> str:
        """A scheduler on a machine of its own (ports chosen by the system); its address."""
        self.lan.machine("scheduler")
        host = self.lan.addresses["scheduler"]
        log = self._start(
            "scheduler",
            ["scheduler", "--host", host, "--port", "0", "--dashboard-port", "0"],
            machine="scheduler",
        )
        self.address = self.wait_for(log, re.compile(r"^scheduler at (tcp://\S+);", re.M))
        return self.address

    def start_worker(self, name: str, tree: Path = REPO, process: str | None = None) -> str:
        """A worker on machine ``name`` (named so), running the code of ``tree``, known here
        as ``process`` (default: ``name``; a worker started again needs another); its
        address."""
        self.lan.machine(name)
        args = ["worker", self.address, "--name", name, "--host", self.lan.addresses[name]]
        log = self._start(process or name, args, tree, machine=name)
        return self.wait_for(log, re.compile(rf"^worker {name} at (tcp://\S+),", re.M))

    def kill(self, name: str) -> None:
        """SIGKILL the process group of ``name``: the machine is lost, mid-run or not."""
        process = self.processes.pop(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def wait_for(
        self, log: Path, pattern: re.Pattern[str], timeout: float = START_TIMEOUT_S
    ) -> str:
        """The first group of ``pattern`` once it appears in ``log``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = pattern.search(log.read_text(errors="replace"))
            if match:
                return match.group(1)
            time.sleep(0.2)
        raise AssertionError(f"{pattern.pattern!r} not in {log}:\n{log.read_text()[-3000:]}")

    def close(self) -> None:
        """SIGTERM every process group left, SIGKILL after 10 s."""
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for process in self.processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()

    def command(self, machine: str, command: list[str]) -> list[str]:
        """``command`` run on ``machine`` (in its namespace, made on first use)."""
        return ["ip", "netns", "exec", self.lan.machine(machine), *command]

    def _start(self, name: str, args: list[str], tree: Path = REPO, *, machine: str) -> Path:
        log = self.logs / f"{name}.log"
        command = [sys.executable, "-m", "experiments.cluster", *args]
        with log.open("wb") as out:
            self.processes[name] = subprocess.Popen(
                self.command(machine, command),
                cwd=tree,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return log
