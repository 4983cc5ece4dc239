"""The run's controller: ``mrc-controller run`` as a child process, with its event log and
status socket inside the run's directory.

The socket and log file names carry the run prefix (``<prefix>-controller.sock``), so the
controller's command line names ``<prefix>-`` and the prefix sweep of
``testbed.mininet.cleanup`` (``make stop``) kills it even when the runner itself was
killed with SIGKILL and never stopped it.

The controller is told the target (``--target linux``) unless it is the controller's default
(``bmv2``: the command line is the one it always was), and, where the target's switches live in
namespaces of their own (kernel switches), where they are (``--netns-prefix <prefix>``: switch
``s1`` is ``<prefix>-s1``).

``routing`` is the controller's routing policy (``static``, ``reactive``, ``converge[:SECONDS]``:
``controller.intent.policy``), checked here so that a bad one fails before anything starts;
None leaves the controller's default (``reactive``). ``path_mode`` (``ecmp``, ``structured``,
``srv6``: ``topologies.paths.PathMode``) is how the fabric reads a packet's EV; None leaves the
controller's default (``ecmp``).

``name`` tells two controllers of one run apart (``controller``, ``controller-backup``: the
file names follow it), and ``extra`` is what the caller adds to the command line (a backup's
``--election-id``, the ``--primary-lock`` of the linux target): ``testbed.controllers``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from controller.app.status_socket import request_status
from controller.intent.policy import RoutingPolicy
from controller.targets import DEFAULT_TARGET
from testbed.mininet.switch_target import switch_target
from testbed.processes import ManagedProcess, ProcessFailed
from topologies.paths import PathMode

#: Seconds the controller gets to push the pipeline and the intent to every switch.
IN_SERVICE_TIMEOUT_S = 120.0


def read_event_log(path: Path) -> list[dict[str, Any]]:
    """Every complete event in a controller's JSON-lines log so far ([] before it exists).

    The controller may be writing as this reads, and a reader can see a line in part: only what
    ends in a newline is parsed; the rest is read again next time."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    complete = data[: data.rfind(b"\n") + 1]
    return [json.loads(line) for line in complete.splitlines() if line.strip()]


class ControllerRun:
    """One controller process for a topology of a Mininet run."""

    def __init__(
        self,
        topology_ref: str,
        run_dir: Path,
        prefix: str,
        discovery: bool = True,
        target: str = DEFAULT_TARGET,
        routing: str | None = None,
        path_mode: str | None = None,
        name: str = "controller",
        extra: Sequence[str] = (),
    ) -> None:
        self.socket = run_dir / f"{prefix}-{name}.sock"
        self.event_log = run_dir / f"{prefix}-{name}.jsonl"
        #: The routing policy the controller runs (its default when none was asked for).
        self.routing = RoutingPolicy() if routing is None else RoutingPolicy.parse(routing)
        #: How the fabric reads EVs (the controller's default when none was asked for).
        self.path_mode = PathMode.ECMP if path_mode is None else PathMode(path_mode)
        self.command = controller_command(
            topology_ref, self.socket, self.event_log, prefix, discovery, target, routing, path_mode
        ) + list(extra)
        output = run_dir / f"{prefix}-{name}.out"
        self.process = ManagedProcess("mrc-controller", self.command, output)

    def events(self) -> list[dict[str, Any]]:
        """Every complete event written so far."""
        return read_event_log(self.event_log)

    def wait_in_service(
        self, switches: list[str], after: int = 0, timeout: float = IN_SERVICE_TIMEOUT_S
    ) -> None:
        """Wait until every switch in ``switches`` was put in service (event index >= ``after``)."""
        deadline = time.monotonic() + timeout
        waiting = set(switches)
        while True:
            for event in self.events()[after:]:
                if event.get("event") == "switch_in_service":
                    waiting.discard(event.get("switch"))
            if not waiting:
                return
            if not self.process.running:
                raise ProcessFailed(
                    f"the controller exited with status {self.process.process.returncode}:\n"
                    f"{self.process.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise ProcessFailed(
                    f"switches {sorted(waiting)} not in service after {timeout:.0f} s "
                    f"(controller log: {self.event_log})"
                )
            time.sleep(0.1)

    def status(self) -> dict[str, Any]:
        """The controller's status snapshot (StatusUnavailable when it does not answer)."""
        return request_status(self.socket)

    def stop(self) -> int | None:
        """SIGTERM: the controller closes its channels and removes its socket."""
        return self.process.stop()


def controller_command(
    topology_ref: str,
    socket: Path,
    event_log: Path,
    prefix: str,
    discovery: bool = True,
    target: str = DEFAULT_TARGET,
    routing: str | None = None,
    path_mode: str | None = None,
) -> list[str]:
    """The controller's command line for one run (``discovery=False``: ``--no-discovery``,
    links as the topology lists them; ``routing``: ``--routing``, ``path_mode``:
    ``--path-mode``, each checked, ValueError if bad)."""
    command = [sys.executable, "-m", "controller.cli", "run", topology_ref]
    if target != DEFAULT_TARGET:
        command += ["--target", target]
    if switch_target(target).kind.in_own_namespace:
        command += ["--netns-prefix", prefix]
    command += ["--socket", str(socket), "--event-log", str(event_log)]
    if not discovery:
        command.append("--no-discovery")
    if routing is not None:
        command += ["--routing", str(RoutingPolicy.parse(routing))]
    if path_mode is not None:
        command += ["--path-mode", str(PathMode(path_mode))]
    return command
