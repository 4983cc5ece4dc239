"""The host agents of a run (``mrc-agent serve`` in every host's namespace) and transfers
between them (perf transfers, as ``mrc-perf`` runs them, through the sending host's agent).

Every agent gets its own control socket in the run directory: Unix socket paths live in the
file system, which all namespaces share, so the default path would be claimed by the first
agent only. A transfer is the ``perf`` request ``mrc-perf`` sends when an agent runs, on the
sender's agent's socket; the agent does the sending, so the transfer uses the agent's EVs,
planes and congestion control exactly as any other client would. The runner sends that
request itself rather than starting ``mrc-perf``: the same request and result, without a
Python start-up per transfer on a two-core machine, and with the live progress samples that
the experiments time their link cuts by.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.io.control_client import connect_to_agent
from agent.io.control_protocol import PerfRequest
from agent.io.errors import AgentError
from agent.io.transport import transport_named
from agent.roce.config import DcqcnParams
from agent.roce.profiles import profile_named
from testbed.mininet.naming import host_netns
from testbed.processes import ManagedProcess
from topologies.model import Host, LinkId, Nic, Topology

#: What ``mrc-agent serve`` prints once it owns UDP 4791 and its sockets.
AGENT_READY = "mrc-agent: ready"
AGENT_READY_TIMEOUT_S = 30.0


class TransferFailed(RuntimeError):
    """A transfer did not complete; the message names the hosts and the agent's error,
    ``code`` the agent's error code (``transfer_failed``: it started and died, e.g. a RoCE QP
    out of retries; None when the agent never answered), ``at`` when it failed."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        #: When it failed (``time.monotonic()``): a run's timeline places the failure.
        self.at = time.monotonic()


@dataclass(frozen=True)
class TransferSpec:
    """One perf transfer: from ``source`` to ``destination``, sized by bytes or seconds;
    what is left None keeps the agent's default (MRC, 256 EVs, 64 KiB messages, 1 s
    samples). ``transport`` is a name of
    ``agent.io.transport``'s registry."""

    source: str
    destination: str
    total_bytes: int | None = None
    duration_s: float | None = None
    evs: int | None = None
    message_size: int | None = None
    interval_s: float | None = None
    transport: str | None = None
    #: A RoCE QP's verbs settings (the local ACK timeout's exponent, and its retries).
    roce_timeout: int | None = None
    roce_retry_cnt: int | None = None
    #: The RoCE profile (``agent.roce.profiles``; None: perftest) and the QPs the transfer is
    #: striped over (None: the profile's count).
    roce_profile: str | None = None
    roce_qps: int | None = None
    #: The RoCE NIC's line rate in bits/s, DCQCN scaled to it (``DcqcnParams.scaled_to``):
    #: on links slowed far below 10 Gbit/s, about the link's rate. None: 10 Gbit/s.
    roce_line_rate: float | None = None

    def request_options(self) -> dict[str, Any]:
        """The perf request's transport and EV options (with ``roce``, the QPs' verbs
        settings, and the profile, QP count and line rate when given); ValueError for a
        transport or a RoCE profile the agent does not have, or a line rate it refuses."""
        transport = None if self.transport is None else transport_named(self.transport)
        options: dict[str, Any] = {"transport": self.transport, "evs": self.evs}
        if transport is not None and transport.is_roce:
            options.update(roce_timeout=self.roce_timeout, roce_retry_cnt=self.roce_retry_cnt)
            if self.roce_profile is not None:
                options["roce_profile"] = profile_named(self.roce_profile).name
            if self.roce_qps is not None:
                options["roce_qps"] = self.roce_qps
            if self.roce_line_rate is not None:
                DcqcnParams.scaled_to(self.roce_line_rate / 8)  # refuses what the agent would
                options["roce_line_rate"] = self.roce_line_rate
        return options


ProgressCallback = Callable[[dict[str, Any]], None]


def slowest_fabric_rate(topology: Topology) -> int | None:
    """Packets/s of the slowest rate-limited switch-to-switch link (None: none is limited):
    the agents' congestion control aims its queueing at it (``mrc-agent --fabric-rate``)."""
    switches = {switch.name for switch in topology.switches}
    rates = [
        link.params.queue_rate_pps
        for link in topology.links
        if link.a.node in switches and link.b.node in switches and link.params.queue_rate_pps
    ]
    return min(rates) if rates else None


class HostAgents:
    """One ``mrc-agent serve`` per host; :meth:`stop` ends them all."""

    def __init__(
        self,
        topology: Topology,
        run_dir: Path,
        prefix: str,
        path_mode: str | None = None,
        topology_ref: str | None = None,
    ) -> None:
        """``path_mode`` (``structured`` or ``srv6``; None or ``ecmp``: random EVs) with
        ``topology_ref``, the topology's reference (preset or absolute file path): each agent
        gives its connections EVs that name the exact paths to the peer (``mrc-agent serve
        --path-mode``); in ``srv6`` mode every packet leaves in its path's carrier and the
        agents run over IPv6 (planes and peers by their IPv6 addresses)."""
        if path_mode not in (None, "ecmp") and topology_ref is None:
            raise ValueError(f"path mode {path_mode} needs the topology's reference")
        self.topology = topology
        self.run_dir = run_dir
        self.prefix = prefix
        self.path_mode = None if path_mode == "ecmp" else path_mode
        self.topology_ref = topology_ref
        #: Agents run over IPv6 (SRv6 mode), else IPv4.
        self.ipv6 = path_mode == "srv6"
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
                [sys.executable, "-m", "agent.cli.agent_main", "serve", *self.serve_options(host)],
                self.run_dir / f"{self.prefix}-{host.name}-agent.out",
                netns=self.netns_of(host.name),
            )
        for agent in self.agents.values():
            agent.wait_for_output(AGENT_READY, AGENT_READY_TIMEOUT_S)

    def serve_options(self, host: Host) -> list[str]:
        """``mrc-agent serve``'s options for ``host``: its planes, its control socket and the
        topology's DSCP values (the switches classify by them; an agent marking other values
        would have its packets queued, trimmed and counted as the wrong class)."""
        options = []
        for nic in sorted(host.nics, key=lambda n: (n.plane, n.index)):
            options += ["--plane", self._address(nic)]
        options += ["--socket", str(self.socket_of(host.name))]
        if self.path_mode is not None and self.topology_ref is not None:
            options += ["--path-mode", self.path_mode, "--topology", self.topology_ref]
        rate = slowest_fabric_rate(self.topology)
        if rate is not None:
            options += ["--fabric-rate", str(rate)]
        return [*options, "--dscp", self.topology.settings.dscp.option()]

    def address_of(self, host: str, source: str | None = None, cut: Collection[LinkId] = ()) -> str:
        """The address a peer reaches ``host``'s agent on: its first NIC's (IPv4, or IPv6 in
        SRv6 mode) on a plane
        where neither ``host``'s NIC nor ``source``'s has been cut (the side channel runs
        over one plane; with every plane cut at one end, the first NIC's, to fail clearly)."""
        target = self.topology.host(host)
        if source is not None:
            sender = self.topology.host(source)
            for nic in target.nics:
                if target.link(nic).id in cut:
                    continue
                if any(
                    own.plane == nic.plane and sender.link(own).id not in cut for own in sender.nics
                ):
                    return self._address(nic)
        return self._address(target.nics[0])

    def _address(self, nic: Nic) -> str:
        return str(nic.ipv6.ip if self.ipv6 else nic.ipv4.ip)

    def transfer(
        self,
        spec: TransferSpec,
        on_progress: ProgressCallback | None = None,
        cut: Collection[LinkId] = (),
    ) -> dict[str, Any]:
        """Run ``spec`` through the source's agent (its control socket, as ``mrc-perf``
        does) and return the agent's result; ``on_progress`` gets each interval's sample as
        it happens; ``cut`` (links cut now) steers the side channel to a plane still up.
        TransferFailed when the agent reports an error."""
        for host in (spec.source, spec.destination):
            if host not in self.agents:
                raise ValueError(f"no agent runs on {host!r} (hosts: {', '.join(self.agents)})")
        if spec.source == spec.destination:
            raise ValueError(f"a transfer needs two hosts, got {spec.source} twice")
        where = f"{spec.source} -> {spec.destination}"
        try:
            client = connect_to_agent(str(self.socket_of(spec.source)))
            if client is None:
                raise TransferFailed(f"{where}: the agent on {spec.source} does not answer")
            options = spec.request_options()
            with client:
                return client.request(
                    PerfRequest(
                        to=self.address_of(spec.destination, spec.source, cut),
                        total_bytes=spec.total_bytes,
                        duration=spec.duration_s,
                        message_size=spec.message_size,
                        interval=spec.interval_s,
                        **options,
                    ),
                    on_progress,
                )
        except AgentError as error:
            raise TransferFailed(f"{where}: {error}", error.code.value) from None

    def transfer_all(
        self,
        specs: Sequence[TransferSpec],
        cut: Collection[LinkId] = (),
        on_progress: Sequence[ProgressCallback | None] | None = None,
    ) -> list[dict[str, Any] | TransferFailed]:
        """Run ``specs`` at the same time (one thread each: they only wait on sockets);
        each one's result, or its failure, in order; ``on_progress[i]`` gets the samples of
        ``specs[i]`` (called from that transfer's thread)."""
        callbacks = list(on_progress) if on_progress is not None else [None] * len(specs)
        if len(callbacks) != len(specs):
            raise ValueError(f"{len(specs)} transfers but {len(callbacks)} progress callbacks")

        def one(index: int) -> dict[str, Any] | TransferFailed:
            try:
                return self.transfer(specs[index], callbacks[index], cut=cut)
            except TransferFailed as failure:
                return failure

        if not specs:
            return []
        with ThreadPoolExecutor(max_workers=len(specs)) as pool:
            return list(pool.map(one, range(len(specs))))

    def stop(self) -> None:
        """SIGTERM every agent (SIGKILL after the grace period)."""
        for agent in self.agents.values():
            agent.stop()
