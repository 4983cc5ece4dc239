"""The run's controllers: the primary and, when the run asks (``--backup``), a backup beside it.

The backup is a second ``mrc-controller`` of the same topology that connects to every switch
and follows the fabric but does not write. Who writes is decided as each target can: on the
P4Runtime targets (bmv2, tofino) the backup has a lower election id
(:data:`BACKUP_ELECTION_ID` against the controller's default 10) and the switches arbitrate:
when the primary goes, finsy has the backup bid the election id the switch names (the dead
primary's), so a restarted primary, bidding the same id, is refused it, bids one less and
stays backup; on the linux target, whose netlink has no
arbitration, both name one lock file (``--primary-lock``) and only its holder writes
(``controller.southbound.linux.primacy``), so a restarted controller waits as backup.

The two are named by how the run started them, ``primary`` and ``backup``, whatever role each
holds later: ``controller restart primary`` restarts the one started as primary.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.app.status_socket import StatusUnavailable
from controller.southbound.interface import LinkEvidence, SwitchRole
from controller.targets import DEFAULT_TARGET, controller_target
from testbed.controller_run import IN_SERVICE_TIMEOUT_S, ControllerRun
from testbed.processes import ProcessFailed

PRIMARY = "primary"
BACKUP = "backup"
#: The backup's election id: below the controller's default (10), so the primary wins.
BACKUP_ELECTION_ID = 5
#: Where a target has no arbitration of its own (linux): the lock file, in the run directory.
LOCK_NAME = "controller.lock"


@dataclass
class _Follower:
    """Per-switch roles of one controller, read from its event log as it grows."""

    path: Path
    offset: int = 0
    roles: dict[str, SwitchRole] = field(default_factory=dict)

    def update(self) -> None:
        try:
            with self.path.open("rb") as log:
                log.seek(self.offset)
                data = log.read()
        except OSError:
            return
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.splitlines():
            event = _parse(line)
            name = event.get("event")
            if name == "switch_connected":
                self.roles[event["switch"]] = SwitchRole(event["role"])
            elif name == "switch_disconnected":
                self.roles.pop(event["switch"], None)


def _parse(line: bytes) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class ControllerState:
    """One controller at one moment: alive or not, and where it is primary or backup."""

    alive: bool
    pid: int
    primary_on: frozenset[str] = frozenset()
    backup_on: frozenset[str] = frozenset()

    def stance(self, switches: frozenset[str]) -> str:
        """``dead``, ``primary`` or ``backup`` (on every switch), or ``connecting``."""
        if not self.alive:
            return "dead"
        if self.primary_on == switches:
            return PRIMARY
        if self.backup_on == switches:
            return BACKUP
        return "connecting"


class Controllers:
    """The primary controller of a run and its optional backup (see the module docs)."""

    def __init__(
        self,
        topology_ref: str,
        run_dir: Path,
        prefix: str,
        switches: Sequence[str],
        backup: bool = False,
        discovery: bool = True,
        target: str = DEFAULT_TARGET,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.switches = frozenset(switches)
        self.target = target
        self._args = (topology_ref, run_dir, prefix, discovery, target)
        self._run_dir, self._prefix = run_dir, prefix
        self._options = dict(options or {})
        self._lock = run_dir / f"{prefix}-{LOCK_NAME}"
        self.names: tuple[str, ...] = (PRIMARY, BACKUP) if backup else (PRIMARY,)
        self.runs: dict[str, ControllerRun] = {}
        self._followers: dict[str, _Follower] = {}
        #: The CLI's thread and the watch's both read the logs.
        self._reading = threading.Lock()
        #: A kill or restart looks at the process and acts on what it saw: the CLI and the live
        #: view's buttons must not both start one controller.
        self._changing = threading.Lock()

    @property
    def arbitrated(self) -> bool:
        """Whether the switches arbitrate by election id (else the lock file decides)."""
        return controller_target(self.target).capabilities.arbitration

    def start(self) -> None:
        """The primary until every switch is in service, then the backup until it is connected
        to every switch as backup."""
        self._start(PRIMARY).wait_in_service(sorted(self.switches))
        if BACKUP in self.names:
            self._start(BACKUP)
            self.wait_stance(BACKUP, BACKUP)

    def _start(self, name: str) -> ControllerRun:
        paired = len(self.names) > 1
        extra = arbitration_arguments(name, paired, self.arbitrated, self._lock)
        if paired and self.probes:
            # A backup sends no probes: it takes its link state from the other one.
            other = BACKUP if name == PRIMARY else PRIMARY
            extra += ["--peer-socket", str(self._socket_of(other))]
        run = ControllerRun(*self._args, **self._options, name=_file_name(name), extra=extra)
        self.runs[name] = run
        follower = _Follower(run.event_log)
        follower.offset = _size(run.event_log)  # a restarted one: only its new events count
        with self._reading:
            self._followers[name] = follower
        return run

    @property
    def probes(self) -> bool:
        """Whether links are watched by probes, which only a primary may send."""
        return controller_target(self.target).capabilities.link_evidence is LinkEvidence.PROBES

    def _socket_of(self, name: str) -> Path:
        return self._run_dir / f"{self._prefix}-{_file_name(name)}.sock"

    def run(self, name: str) -> ControllerRun:
        """The controller started as ``name`` (KeyError: the run has none)."""
        if name not in self.names:
            raise KeyError(f"this run has no {name} controller (start it with --backup)")
        return self.runs[name]

    def state(self, name: str) -> ControllerState:
        """What ``name`` is doing now, from its process and its event log."""
        run = self.run(name)
        with self._reading:
            follower = self._followers[name]
            follower.update()
            roles = dict(follower.roles)
        return ControllerState(
            alive=run.process.running,
            pid=run.process.pid,
            primary_on=frozenset(s for s, r in roles.items() if r is SwitchRole.PRIMARY),
            backup_on=frozenset(s for s, r in roles.items() if r is SwitchRole.BACKUP),
        )

    def states(self) -> dict[str, ControllerState]:
        return {name: self.state(name) for name in self.names}

    def acting(self) -> ControllerRun:
        """The live controller that is primary on the most switches (the primary's run when
        none is alive: its answers say so)."""
        alive = [(len(s.primary_on), n) for n, s in self.states().items() if s.alive]
        if not alive:
            return self.runs[PRIMARY]
        return self.runs[max(alive)[1]]

    def status(self) -> dict[str, Any]:
        """The status snapshot of whichever controller is acting; StatusUnavailable, saying
        the fabric is unmanaged, when none is alive."""
        if not any(state.alive for state in self.states().values()):
            raise StatusUnavailable(unmanaged_line())
        return self.acting().status()

    def kill(self, name: str) -> float:
        """SIGKILL ``name`` (as a crash); the monotonic time of the kill (ValueError: it is
        not running)."""
        with self._changing:
            run = self.run(name)
            if not run.process.running:
                raise ValueError(f"the {name} controller is not running")
            killed_at = time.monotonic()
            run.process.kill()
            return killed_at

    def restart(self, name: str) -> str:
        """Start ``name`` again (it must be dead) and wait until it holds a role on every
        switch; returns that role, ``primary`` or ``backup``."""
        with self._changing:
            if self.run(name).process.running:
                pid = self.run(name).process.pid
                raise ValueError(f"the {name} controller is running (pid {pid})")
            self._start(name)
        return self.wait_stance(name, PRIMARY, BACKUP)

    def wait_stance(self, name: str, *stances: str, timeout: float = IN_SERVICE_TIMEOUT_S) -> str:
        """Wait until ``name`` is in one of ``stances`` on every switch; the one reached."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.state(name)
            stance = state.stance(self.switches)
            if stance in stances:
                return stance
            if not state.alive:
                run = self.runs[name]
                raise ProcessFailed(f"the {name} controller exited:\n{run.process.log_tail()}")
            if time.monotonic() > deadline:
                raise ProcessFailed(f"the {name} controller is not {'/'.join(stances)} in time")
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM every controller (the backup first, so that it never takes over)."""
        for name in reversed(self.names):
            if name in self.runs:
                self.runs[name].stop()


def arbitration_arguments(name: str, paired: bool, arbitrated: bool, lock: Path) -> list[str]:
    """What tells controller ``name`` whether it writes: a lower election id for the backup
    where the switches arbitrate, the shared lock file for both where they do not (``paired``:
    a backup runs; alone, a controller needs neither)."""
    if not paired:
        return []
    if not arbitrated:
        return ["--primary-lock", str(lock)]
    return ["--election-id", str(BACKUP_ELECTION_ID)] if name == BACKUP else []


def _file_name(name: str) -> str:
    """What a controller's files are named after (the primary's as a lone controller's)."""
    return "controller" if name == PRIMARY else "controller-backup"


def unmanaged_line() -> str:
    """What the testbed says when no controller is left."""
    return (
        "no controller is running: the fabric is unmanaged; the switches forward with what "
        "they hold, and a cut link is left to their own fast failover "
        "(`controller restart primary` starts one again)"
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
