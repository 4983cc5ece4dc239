"""A Mininet switch node that runs one ``simple_switch_grpc``.

Debian's Mininet has no P4 switch class, so this is a small one. The switch lives in the root
namespace (its P4Runtime and Thrift ports are then reachable on 127.0.0.1 by the controller and
``simple_switch_CLI``) and BMv2 binds the root-namespace veth ends named by the wiring plan.
The command line comes from ``testbed.bmv2.bmv2_command``, so every BMv2 of the project runs with
the same options: no program (the controller pushes it), bounded rotating logs, the CPU port,
three priority queues (``--priority-queues 3``) and a Thrift port.

BMv2 is started in its own session: Ctrl-C in a terminal (the Mininet CLI interrupting a
command, say) must not kill the switches; teardown ends them explicitly.
"""

from __future__ import annotations

import contextlib
import re
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from mininet.node import Switch

from testbed.bmv2 import Bmv2Options, bmv2_command, thrift_cli

#: How long a stopping BMv2 gets after SIGTERM before SIGKILL.
STOP_GRACE_S = 3.0
#: How much of BMv2's own output an error message quotes.
LOG_TAIL_BYTES = 2000
#: One port line of ``simple_switch_CLI``'s ``show_ports``: number, interface, status.
_SHOW_PORTS_LINE = re.compile(r"^\s*(\d+)\s+(\S+)\s+(UP|DOWN)\b", re.MULTILINE)


class SwitchStartError(RuntimeError):
    """A BMv2 process exited or did not open its service ports in time."""


class Bmv2Switch(Switch):  # type: ignore[misc]  # Mininet has no type hints
    """A BMv2 (``simple_switch_grpc``) switch in the root namespace."""

    def __init__(
        self, name: str, bmv2: Bmv2Options, startup_timeout: float = 30.0, **params: Any
    ) -> None:
        # Root namespace whatever Mininet's default: 127.0.0.1 must reach the service ports.
        params["inNamespace"] = False
        super().__init__(name, dpid=f"{bmv2.device_id:x}", **params)
        self.bmv2 = bmv2
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None

    @property
    def output_path(self) -> Path:
        """BMv2's stdout and stderr (its log proper is ``bmv2-<device id>`` next to it)."""
        return self.bmv2.log_dir / f"bmv2-{self.bmv2.device_id}.out"

    @property
    def command(self) -> list[str]:
        """The command line this switch runs."""
        return bmv2_command(self.bmv2)

    @property
    def bmv2_pid(self) -> int | None:
        """Pid of the running BMv2, or None."""
        return self.process.pid if self.process and self.process.poll() is None else None

    # -- Mininet's switch interface --------------------------------------------------------
    def start(self, controllers: Sequence[Any]) -> None:
        """Launch BMv2 (Mininet calls this; ``batchStartup`` then waits for every switch)."""
        self.launch()

    @classmethod
    def batchStartup(cls, switches: Sequence[Bmv2Switch]) -> Sequence[Bmv2Switch]:
        """Wait until every launched switch serves P4Runtime and Thrift (Mininet's hook)."""
        for switch in switches:
            switch.wait_serving(switch.startup_timeout)
        return switches

    def stop(self, deleteIntfs: bool = True) -> None:
        """End BMv2, then let Mininet delete the interfaces."""
        self.stop_process()
        super().stop(deleteIntfs)

    # -- process control -------------------------------------------------------------------
    def launch(self) -> None:
        """Start BMv2 with this switch's options (the ports must be free)."""
        if self.bmv2_pid is not None:
            raise SwitchStartError(f"{self.name}: BMv2 already runs (pid {self.bmv2_pid})")
        self.bmv2.log_dir.mkdir(parents=True, exist_ok=True)
        self._close_output()
        self._output = open(self.output_path, "ab")  # noqa: SIM115 (closed in stop_process)
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=self._output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_serving(self, timeout: float | None = None) -> None:
        """Block until BMv2 accepts connections on its gRPC and Thrift ports."""
        if self.process is None:
            raise SwitchStartError(f"{self.name}: BMv2 was never launched")
        timeout = self.startup_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        waiting = [self.bmv2.grpc_port, self.bmv2.thrift_port]
        while waiting:
            if self.process.poll() is not None:
                raise SwitchStartError(
                    f"{self.name}: BMv2 exited with status {self.process.returncode} "
                    f"before serving; its output ({self.output_path}):\n{self._output_tail()}"
                )
            if _accepts(self.bmv2.grpc_host, waiting[0]):
                waiting.pop(0)
                continue
            if time.monotonic() >= deadline:
                raise SwitchStartError(
                    f"{self.name}: nothing listening on {self.bmv2.grpc_host}:{waiting[0]} "
                    f"after {timeout:.0f} s; BMv2 output ({self.output_path}):\n"
                    f"{self._output_tail()}"
                )
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL BMv2 (as a crash would end it) and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(STOP_GRACE_S)
        self._close_output()

    def stop_process(self) -> None:
        """SIGTERM BMv2, SIGKILL it if it lingers; safe to call when it is not running."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_GRACE_S)
        self._close_output()

    def restart(self, timeout: float | None = None) -> int:
        """kill -9, then start again with the same options; returns the new pid.

        The switch comes back empty (no pipeline, no entries): the controller reprograms it.
        """
        self.kill()
        self.launch()
        self.wait_serving(self.startup_timeout if timeout is None else timeout)
        assert self.process is not None
        return self.process.pid

    def port_status(self) -> dict[int, bool]:
        """BMv2's own view of each port's link (True: up), over Thrift.

        BMv2 polls link state (every 200 ms) and only then tells PI, whose watch-port enforcer
        updates the groups: after a cut or a restore this is the state to wait for before
        reprogramming groups, or before expecting ``watch_port`` to have acted.
        """
        return parse_show_ports(thrift_cli(["show_ports"], self.bmv2.thrift_port))

    def _close_output(self) -> None:
        if self._output is not None:
            self._output.close()
            self._output = None

    def _output_tail(self) -> str:
        try:
            with self.output_path.open("rb") as output:
                output.seek(0, 2)
                output.seek(max(0, output.tell() - LOG_TAIL_BYTES))
                return output.read().decode(errors="replace")
        except OSError as error:
            return f"(unreadable: {error})"


def parse_show_ports(text: str) -> dict[int, bool]:
    """Port number to link up, from the output of ``simple_switch_CLI``'s ``show_ports``."""
    return {int(port): status == "UP" for port, _, status in _SHOW_PORTS_LINE.findall(text)}


def _accepts(host: str, port: int) -> bool:
    with contextlib.closing(socket.socket()) as probe:
        probe.settimeout(0.2)
        return probe.connect_ex((host, port)) == 0
