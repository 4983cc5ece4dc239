"""Assemble and run a controller for a topology: southbound, queues, fabric logic, status socket.

The target picks the southbound: ``bmv2`` is P4Runtime with Thrift queues and LLDP link
discovery; ``linux`` is netlink into one namespace per switch, with link state from carrier.

``run_controller`` is what ``mrc-controller run`` does after parsing its arguments; it returns
when cancelled (Ctrl-C, SIGTERM), after closing every channel and removing the status socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

import finsy as fy

from controller.app.config import ConfigError, ControllerConfig, Target, TlsConfig
from controller.app.eventlog import EventLog
from controller.app.fabric import FabricController, LinkEvidence, discovery_settings
from controller.app.status import collect_status
from controller.app.status_socket import EventFeed, serve_status
from controller.app.watch import describe_topology
from controller.southbound import p4_program
from controller.southbound.interface import Southbound
from controller.southbound.linux.southbound import LinuxOptions, LinuxSouthbound
from controller.southbound.p4runtime import (
    P4RuntimeOptions,
    P4RuntimeSouthbound,
    SwitchEndpoint,
    grpc_address,
)
from controller.southbound.queues import ThriftEndpoint, ThriftQueueBackend
from topologies.model import Topology


def check_compatible(topology: Topology, config: ControllerConfig) -> None:
    """Raise ConfigError when the topology or the configuration cannot work with the target."""
    if config.target is Target.LINUX:
        _check_linux(config)
    else:
        _check_bmv2(topology, config)


def _check_linux(config: ControllerConfig) -> None:
    """Kernel switches need no pipeline; settings that only reach gRPC servers are mistakes."""
    meaningless = [
        name
        for name, given in (("switch_hosts", bool(config.switch_hosts)), ("tls", config.tls))
        if given
    ]
    if meaningless:
        raise ConfigError(
            f"{', '.join(meaningless)}: no meaning on the linux target (switches are network "
            "namespaces on this machine, reached over netlink)"
        )


def _check_bmv2(topology: Topology, config: ControllerConfig) -> None:
    """The topology and configuration must work with mrc.p4 over P4Runtime."""
    if topology.settings.cpu_port != p4_program.COMPILED_CPU_PORT:
        raise ConfigError(
            f"{topology.source}: cpu_port {topology.settings.cpu_port} differs from the port "
            f"compiled into mrc.p4 ({p4_program.COMPILED_CPU_PORT})"
        )
    for path in (config.p4info, config.p4blob):
        if not path.is_file():
            raise ConfigError(f"pipeline file {path} not found (run `make build`)")
    unknown = set(config.switch_hosts) - {switch.name for switch in topology.switches}
    if unknown:
        raise ConfigError(f"switch_hosts names switches not in the topology: {sorted(unknown)}")
    if config.tls is not None:
        for tls_file in (config.tls.ca_cert, config.tls.cert, config.tls.key):
            if tls_file is not None and not tls_file.is_file():
                raise ConfigError(f"TLS file {tls_file} not found")


def build_southbound(topology: Topology, config: ControllerConfig) -> Southbound:
    """The southbound of the configured target for every switch of ``topology``."""
    if config.target is Target.LINUX:
        return LinuxSouthbound(
            [switch.name for switch in topology.switches],
            LinuxOptions(netns_prefix=config.netns_prefix, shapers=config.queues),
        )
    return build_p4runtime_southbound(topology, config)


def build_p4runtime_southbound(topology: Topology, config: ControllerConfig) -> P4RuntimeSouthbound:
    """The P4Runtime southbound for every switch of ``topology``, with Thrift queues."""
    endpoints = [
        SwitchEndpoint(
            switch.name,
            grpc_address(config.host_of(switch.name), switch.grpc_port),
            switch.device_id,
        )
        for switch in topology.switches
    ]
    queues = (
        ThriftQueueBackend(
            {
                switch.name: ThriftEndpoint(config.host_of(switch.name), switch.thrift_port)
                for switch in topology.switches
            }
        )
        if config.queues
        else None
    )
    options = P4RuntimeOptions(
        p4info=config.p4info,
        p4blob=config.p4blob,
        election_id=config.election_id,
        credentials=_credentials(config.tls),
        max_batch=config.max_batch,
    )
    return P4RuntimeSouthbound(endpoints, options, queues)


def build_fabric(topology: Topology, config: ControllerConfig, log: EventLog) -> FabricController:
    """The controller logic for ``topology`` over the configured target's southbound."""
    discovery = discovery_settings(
        topology,
        enabled=config.discovery,
        evidence=LinkEvidence.CARRIER if config.target is Target.LINUX else LinkEvidence.PROBES,
        interval_ms=config.probe_interval_ms,
        miss_limit=config.miss_limit,
        probe_host_ports=config.probe_host_ports,
    )
    return FabricController(
        topology, build_southbound(topology, config), log, discovery, routing=config.routing
    )


async def run_controller(topology: Topology, config: ControllerConfig, log: EventLog) -> None:
    """Run until SIGINT/SIGTERM or cancellation; always closes channels and the socket."""
    fabric = build_fabric(topology, config, log)
    feed = EventFeed(hello={"topology": describe_topology(topology)})
    log.add_listener(feed.publish)
    server = await serve_status(config.status_socket, lambda: collect_status(fabric), feed)
    log.emit("status_socket", path=str(config.status_socket), election_id=config.election_id)
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    stop_signals = (signal.SIGINT, signal.SIGTERM)
    for signum in stop_signals:
        if main is not None:
            loop.add_signal_handler(signum, main.cancel)
    try:
        await fabric.run()
    except asyncio.CancelledError:
        pass
    finally:
        for signum in stop_signals:
            loop.remove_signal_handler(signum)
        server.close()
        with contextlib.suppress(Exception):
            await server.wait_closed()
        with contextlib.suppress(FileNotFoundError):
            config.status_socket.unlink()


def _credentials(tls: TlsConfig | None) -> fy.GRPCCredentialsTLS | None:
    if tls is None:
        return None
    return fy.GRPCCredentialsTLS(
        cacert=tls.ca_cert,
        cert=tls.cert,
        private_key=tls.key,
        target_name_override=tls.target_name_override,
    )
