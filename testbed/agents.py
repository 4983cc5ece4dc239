"""The host agents of a run (``mrc-agent serve`` in every host's namespace) and transfers
between them (``mrc-perf`` through the sending host's agent).

Every agent gets its own control socket in the run directory: Unix socket paths live in the
file system, which all namespaces share, so the default path would be claimed by the first
agent only. A transfer runs ``mrc-perf`` inside the sender's namespace, pointed at that
agent's socket; the agent does the sending, so the transfer uses the agent's EVs, planes and
congestion control exactly as any other client would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.processes import REPO, ManagedProcess
from topologies.mininet.naming import host_netns
from topologies.model import Host, Topology

#: What ``mrc-agent serve`` prints once it owns UDP 4791 and its sockets.
AGENT_READY = "mrc-agent: ready"
AGENT_READY_TIMEOUT_S = 30.0


class TransferFailed(RuntimeError):
    """``mrc-perf`` did not complete; the message has its exit status and error line."""


@dataclass(frozen=True)
class TransferSpec:
    """One ``mrc-perf`` run: from ``source`` to ``destination``, sized by bytes or seconds."""

    source: str
    destination: str
    total_bytes: int | None = None
    duration_s: float | None = None
    evs: int | None = None
    message_size: int | None = None
    interval_s: float | None = None

    def options(self) -> list[str]:
        """The ``mrc-perf`` options for what this spec sets (the rest keep their defaults)."""
        options: list[str] = []
        for flag, value in (
            ("--bytes", self.total_bytes),
            ("--duration", self.duration_s),
            ("--evs", self.evs),
            ("--message-size", self.message_size),
            ("--interval", self.interval_s),
        ):
            if value is not None:
                options += [flag, str(value)]
        return options


class RunningTransfer:
    """A transfer in progress; :meth:`result` waits for its JSON result."""

    def __init__(self, spec: TransferSpec, argv: list[str]) -> None:
        self.spec = spec
        self.process = subprocess.Popen(
            argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def result(self, timeout: float) -> dict[str, Any]:
        """The ``mrc-perf --json`` result; TransferFailed when it failed or ran out of time."""
        spec = self.spec
        try:
            stdout, stderr = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            raise TransferFailed(
                f"{spec.source} -> {spec.destination}: no result within {timeout:.0f} s"
            ) from None
        if self.process.returncode != 0:
            reason = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
            raise TransferFailed(
                f"{spec.source} -> {spec.destination}: mrc-perf exited with status "
                f"{self.process.returncode}: {reason}"
            )
        try:
            result = json.loads(stdout)
        except ValueError:
            raise TransferFailed(
                f"{spec.source} -> {spec.destination}: mrc-perf printed no JSON result"
            ) from None
        if not isinstance(result, dict):
            raise TransferFailed(f"{spec.source} -> {spec.destination}: result is not an object")
        return result

    def cancel(self) -> None:
        """Stop the transfer now (the run is being torn down)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


class HostAgents:
    """One ``mrc-agent serve`` per host; :meth:`stop` ends them all."""

    def __init__(self, topology: Topology, run_dir: Path, prefix: str) -> None:
        self.topology = topology
        self.run_dir = run_dir
        self.prefix = prefix
        self.agents: dict[str, ManagedProcess] = {}

    def socket_of(self, host: str) -> Path:
        """The control socket of ``host``'s agent."""
        return self.run_dir / f"{self.prefix}-{host}-agent.sock"

    def netns_of(self, host: str) -> str:
        """The named namespace ``host`` runs in."""
        return host_netns(self.prefix, host)

    def start(self) -> None:
        """Start every agent, then wait until each is ready (they start in parallel)."""
        for host in self.topology.hosts:
            self.agents[host.name] = ManagedProcess(
                f"mrc-agent on {host.name}",
                [sys.executable, "-m", "agent.cli.agent_main", "serve", *self._serve_options(host)],
                self.run_dir / f"{self.prefix}-{host.name}-agent.out",
                netns=self.netns_of(host.name),
            )
        for agent in self.agents.values():
            agent.wait_for_output(AGENT_READY, AGENT_READY_TIMEOUT_S)

    def _serve_options(self, host: Host) -> list[str]:
        options = []
        for nic in sorted(host.nics, key=lambda n: (n.plane, n.index)):
            options += ["--plane", str(nic.ipv4.ip)]
        return [*options, "--socket", str(self.socket_of(host.name))]

    def address_of(self, host: str) -> str:
        """The address a peer reaches ``host``'s agent on (its first NIC's IPv4)."""
        return str(self.topology.host(host).nics[0].ipv4.ip)

    def start_transfer(self, spec: TransferSpec) -> RunningTransfer:
        """Start ``mrc-perf`` in the source's namespace through its agent."""
        for host in (spec.source, spec.destination):
            if host not in self.agents:
                raise ValueError(f"no agent runs on {host!r} (hosts: {', '.join(self.agents)})")
        if spec.source == spec.destination:
            raise ValueError(f"a transfer needs two hosts, got {spec.source} twice")
        argv = [
            "ip",
            "netns",
            "exec",
            self.netns_of(spec.source),
            sys.executable,
            "-m",
            "agent.cli.perf_main",
            "--to",
            self.address_of(spec.destination),
            "--socket",
            str(self.socket_of(spec.source)),
            "--json",
            *spec.options(),
        ]
        return RunningTransfer(spec, argv)

    def stop(self) -> None:
        """SIGTERM every agent (SIGKILL after the grace period)."""
        for agent in self.agents.values():
            agent.stop()
