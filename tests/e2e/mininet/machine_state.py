"""What of a run exists on the machine, seen the way an operator would look: ``ip netns``,
``ip link`` and ``pgrep``. Deliberately independent of ``testbed.mininet.cleanup``, so the
teardown tests do not check the sweep with the sweep's own eyes."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class RunState:
    """Namespaces, root-namespace links and processes that carry a run's prefix."""

    namespaces: frozenset[str]
    links: frozenset[str]
    processes: frozenset[int]

    @property
    def empty(self) -> bool:
        return not (self.namespaces or self.links or self.processes)


def run_state(prefix: str) -> RunState:
    """The run's footprint right now."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True)
    pgrep = subprocess.run(["pgrep", "-f", f"{prefix}-"], capture_output=True, text=True)
    namespaces = set()
    for line in netns.stdout.splitlines():
        if line.startswith(f"{prefix}-"):
            namespaces.add(line.split()[0])
    link_names = set(re.findall(rf"^\d+: ({prefix}-[^:@\s]+)", links.stdout, flags=re.MULTILINE))
    processes = {int(pid) for pid in pgrep.stdout.split()}
    return RunState(frozenset(namespaces), frozenset(link_names), frozenset(processes))


def process_alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def assert_nothing_left(prefix: str, pids: Collection[int] = ()) -> None:
    """No namespace, link or process of the run, and none of ``pids`` (its processes) alive."""
    state = run_state(prefix)
    assert state.empty, f"run {prefix} left {state}"
    alive = sorted(pid for pid in pids if process_alive(pid))
    assert not alive, f"run {prefix}: processes {alive} still alive"


class LineReader:
    """Reads a child's stdout in a thread, so a test can wait for a line with a timeout."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(proc,), daemon=True)
        self._thread.start()

    def _pump(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first line matching ``pattern``; fails with everything read so far otherwise."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            match = regex.search(line)
            if match:
                return match
        raise AssertionError(f"no line matching {pattern!r}; output:\n{''.join(self.lines)}")

    def rest(self, timeout: float = 10) -> str:
        """Everything the child printed, once it has closed its stdout."""
        self._thread.join(timeout)
        while not self._queue.empty():
            line = self._queue.get()
            if line is not None:
                self.lines.append(line)
        return "".join(self.lines)


def own_session_popen(args: list[str]) -> subprocess.Popen[str]:
    """Start a child in its own session with merged, line-buffered text output."""
    return subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def netns_exec(netns: str | None, *args: str, timeout: float = 30) -> str:
    """stdout of a command in a namespace (root namespace for None); fails the test on error."""
    command = ["ip", "netns", "exec", netns, *args] if netns else list(args)
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"{' '.join(command)} failed: {proc.stderr}"
    return proc.stdout


def eventually(probe: Callable[[], T], done: Callable[[T], bool], timeout: float) -> T:
    """Run ``probe`` until ``done`` holds for its result or ``timeout`` seconds pass; return
    the last result, for the test to assert on.

    For state that BMv2 and PI reach asynchronously (BMv2 polls link state every 200 ms, PI's
    watch-port enforcer then works through a queue): a fixed sleep long enough on an idle
    machine is too short on a loaded one. The timeout bounds a wait, it asserts no speed.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if done(result) or time.monotonic() >= deadline:
            return result
        time.sleep(0.2)
