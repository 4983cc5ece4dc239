"""Processes of the veth benches and tests, run in a network namespace: a server kept in the
background until its output says it is ready and stopped on the way out, a client run to
completion, and the command prefix that pins either to one core and sets its priority."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: How a process is scheduled on its core (``--sched``), as the prefix that does it.
#: ``nice`` (the default): the highest normal priority, so that background work on the machine
#: (a compiler, say) takes little from either tool. Not ``fifo`` (SCHED_FIFO): a process that
#: keeps its core busy at a real-time priority meets the kernel's real-time throttling, a stall
#: of tens of milliseconds once a second (docs/performance.md).
SCHEDULING: dict[str, list[str]] = {
    "nice": ["nice", "-n", "-20"],
    "fifo": ["chrt", "-f", "10"],
    "normal": [],
}


def pinned(command: list[str], core: int, sched: str) -> list[str]:
    """``command`` pinned to ``core``, scheduled as ``sched`` says (a key of ``SCHEDULING``)."""
    return ["taskset", "-c", str(core), *SCHEDULING[sched], *command]


class Background:
    """A server process in a namespace, stopped with SIGTERM (then SIGKILL) on exit."""

    def __init__(self, netns: str, command: list[str]) -> None:
        self.command = command
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", netns, *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
        )

    def wait_ready(self, marker: str, timeout: float = 15.0) -> None:
        """Wait until the server prints ``marker`` on stdout (``RuntimeError`` after
        ``timeout`` seconds or if it exits first)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        seen = b""
        deadline = time.monotonic() + timeout
        while marker.encode() not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(
                    f"{' '.join(self.command)} did not become ready: {self.stderr_tail()}"
                )
            ready, _, _ = select.select([fd], [], [], min(left, 0.2))
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    continue
                seen = (seen + chunk)[-4096:]

    def stderr_tail(self) -> str:
        """The last lines the process wrote to stderr (once it has stopped)."""
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        text = self.proc.stderr.read().decode(errors="replace")
        return " | ".join(text.strip().splitlines()[-3:])

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def __enter__(self) -> Background:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_client(netns: str, command: list[str], timeout: float) -> str:
    """Run a client in ``netns``; its stdout, or ``RuntimeError`` with its stderr."""
    proc = subprocess.run(
        ["ip", "netns", "exec", netns, *command],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}"
        )
    return proc.stdout
