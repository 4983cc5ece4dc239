"""A child process of the testbed, optionally inside a host's namespace, with its output in a
log file and a "ready" line to wait for.

Output goes to a file, never to a pipe: a pipe nobody reads fills up and stalls a long-running
agent or controller, and the file is what a user reads when something goes wrong.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

#: Where the project's modules are imported from (children run with this as their cwd).
REPO = Path(__file__).resolve().parents[1]
#: Seconds a process gets to exit after SIGTERM before it is killed.
STOP_GRACE_S = 5.0


class ProcessFailed(RuntimeError):
    """A child exited or stayed silent instead of becoming ready; the message has its log tail."""


class ManagedProcess:
    """One long-running child: started at construction, stopped by :meth:`stop` (idempotent)."""

    def __init__(
        self, name: str, command: Sequence[str], log_path: Path, netns: str | None = None
    ) -> None:
        self.name = name
        self.command = list(command)
        self.log_path = log_path
        self.netns = netns
        argv = ["ip", "netns", "exec", netns, *command] if netns else list(command)
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                argv,
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Its own process group: a Ctrl-C on the terminal reaches the runner only,
                # which then stops every child in order (controller last).
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def log_text(self) -> str:
        """Everything the process wrote so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 8) -> str:
        """Its last lines of output, for error messages."""
        return "\n".join(self.log_text().strip().splitlines()[-lines:])

    def wait_for_output(self, marker: str, timeout: float) -> None:
        """Return once ``marker`` appears in the output; ProcessFailed if it exits or the
        time runs out first."""
        deadline = time.monotonic() + timeout
        while marker not in self.log_text():
            if not self.running:
                raise ProcessFailed(
                    f"{self.name} exited with status {self.process.returncode} before "
                    f"{marker!r}:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise ProcessFailed(
                    f"{self.name} printed no {marker!r} within {timeout:.0f} s:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def kill(self) -> int | None:
        """SIGKILL, as a crash: the process closes nothing; returns the exit status."""
        if self.running:
            self.process.kill()
            self.process.wait(STOP_GRACE_S)
        return self.process.returncode

    def stop(self, grace: float = STOP_GRACE_S) -> int | None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; returns the exit status."""
        if self.running:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(grace)
        return self.process.returncode
