"""Helpers for running the controller against real BMv2 switches brought up in Mininet.

* ``PAIR_TOPOLOGY``: two leaves joined by two parallel links (so a multi-member group exists,
  and its read-back shows PI's watch_port quirk), two hosts per leaf, on service ports of its
  own so that it never collides with another run.
* :class:`ControllerProcess`: ``mrc-controller run`` as a child process (so that it can be
  killed with SIGKILL like a crashed controller), with its event log and status socket.
* :func:`read_back`: what a switch holds, read by a short-lived observer connection with the
  lowest election id (it never writes, and is a backup whenever a controller is connected).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import finsy as fy

from controller.app.status_socket import request_status
from controller.intent import compute_intent
from controller.southbound import p4_program
from controller.southbound.finsy_codec import from_entity, read_targets
from controller.southbound.mapping import desired_records
from controller.southbound.plan import WritePlan, plan_writes
from controller.southbound.records import RecordSet
from topologies import LinkId, Topology

REPO = Path(__file__).resolve().parents[3]
OBSERVER_ELECTION_ID = 1

PAIR_TOPOLOGY = textwrap.dedent(
    """\
    name: pair
    switches:
      - {name: l1, role: leaf, device_id: 1, grpc_port: 50261, thrift_port: 9361}
      - {name: l2, role: leaf, device_id: 2, grpc_port: 50262, thrift_port: 9362}
    hosts:
      - name: h1
        nics: [{switch: l1, port: 1}]
      - name: h2
        nics: [{switch: l1, port: 2}]
      - name: h3
        nics: [{switch: l2, port: 1}]
      - name: h4
        nics: [{switch: l2, port: 2}]
    links:
      - {a: "l1:3", b: "l2:3"}
      - {a: "l1:4", b: "l2:4"}
    """
)


class EventWatcher:
    """Reads a controller's JSON-lines event log as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: list[dict[str, Any]] = []
        self._offset = 0

    def poll(self) -> list[dict[str, Any]]:
        """Events written since the last poll (only complete lines)."""
        if not self.path.exists():
            return []
        with self.path.open("rb") as stream:
            stream.seek(self._offset)
            data = stream.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        new = [json.loads(line) for line in complete.splitlines() if line.strip()]
        self.events += new
        return new

    def mark(self) -> int:
        """How many events have been written so far (an ``after`` for :meth:`wait_for`)."""
        self.poll()
        return len(self.events)

    def named(self, name: str) -> list[dict[str, Any]]:
        self.poll()
        return [event for event in self.events if event["event"] == name]

    def wait_for(
        self,
        name: str,
        timeout: float,
        where: Callable[[dict[str, Any]], bool] = lambda event: True,
        after: int = 0,
    ) -> dict[str, Any]:
        """The first event ``name`` (at index ``after`` or later) that satisfies ``where``."""
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            for event in self.events[after:]:
                if event["event"] == name and where(event):
                    return event
            if time.monotonic() > deadline:
                tail = "\n".join(json.dumps(e) for e in self.events[-15:])
                raise TimeoutError(f"no {name!r} event within {timeout} s; last events:\n{tail}")
            time.sleep(0.05)

    def wait_in_service(self, switches: list[str], timeout: float, after: int = 0) -> None:
        """Wait until every switch in ``switches`` came into service after index ``after``."""
        for switch in switches:
            self.wait_for("switch_in_service", timeout, lambda e, s=switch: e["switch"] == s, after)


class ControllerProcess:
    """``mrc-controller run`` in a child process."""

    def __init__(
        self,
        topology_file: Path,
        work_dir: Path,
        name: str,
        election_id: int = 10,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.socket = work_dir / f"{name}.sock"
        self.event_log = work_dir / f"{name}.jsonl"
        self.output = (work_dir / f"{name}.out").open("ab")
        command = [
            sys.executable,
            "-m",
            "controller.cli",
            "run",
            str(topology_file),
            "--election-id",
            str(election_id),
            "--socket",
            str(self.socket),
            "--event-log",
            str(self.event_log),
            *extra,
        ]
        self.process = subprocess.Popen(
            command, cwd=REPO, stdout=self.output, stderr=subprocess.STDOUT
        )
        self.events = EventWatcher(self.event_log)

    def kill(self) -> None:
        """SIGKILL: the controller dies without closing anything, like a crash."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.output.close()

    def stop(self) -> int:
        """SIGTERM, as an operator stopping it; returns the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.output.close()
        return self.process.returncode

    def status(self) -> dict[str, Any]:
        return request_status(self.socket)


def read_back(topology: Topology, switch: str) -> RecordSet:
    """What ``switch`` holds, as records, read by a passive observer connection."""
    handle = topology.switch(switch)

    async def read() -> RecordSet:
        observer = fy.Switch(
            f"observer-{switch}",
            f"127.0.0.1:{handle.grpc_port}",
            fy.SwitchOptions(
                p4info=p4_program.P4INFO_PATH,
                device_id=handle.device_id,
                initial_election_id=OBSERVER_ELECTION_ID,
            ),
        )
        async with observer:
            reader: Any = observer.read(read_targets())
            records = [from_entity(entity, observer.p4info) async for entity in reader]
        return RecordSet(records)

    return asyncio.run(read())


def difference(topology: Topology, switch: str, down: frozenset[LinkId] = frozenset()) -> WritePlan:
    """What the switch lacks to hold its intent (empty when it holds it, quirk tolerated)."""
    wanted = desired_records(compute_intent(topology, down).switch(switch))
    return plan_writes(read_back(topology, switch), wanted)


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(0.1)
