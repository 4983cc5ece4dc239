"""Assemble and run a controller for a topology: southbound, queues, fabric logic, status socket.

The target picks the southbound: ``bmv2`` is P4Runtime with Thrift queues and LLDP link
discovery; ``linux`` is netlink into one namespace per switch, with link state from carrier;
``tofino`` is P4Runtime to Tofino switches (the TNA program, the topology's port map, LLDP).

``run_controller`` is what ``mrc-controller run`` does after parsing its arguments; it returns
when cancelled (Ctrl-C, SIGTERM), after closing every channel and removing the status socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

import finsy as fy

from controller.app.config import ConfigError, ControllerConfig, Target, TlsConfig
from controller.app.discovery import LinkEvidence, discovery_settings
from controller.app.eventlog import EventLog
from controller.app.fabric import FabricController
from controller.app.status import collect_status
from controller.app.status_socket import EventFeed, serve_status
from controller.app.watch import describe_topology
from controller.intent import compute_intent
from controller.southbound import p4_program
from controller.southbound.device_ports import DevicePorts
from controller.southbound.interface import Southbound
from controller.southbound.linux.path_modes import linux_path_mode_refusal
from controller.southbound.linux.southbound import LinuxOptions, LinuxSouthbound
from controller.southbound.p4runtime import (
    P4RuntimeOptions,
    P4RuntimeSouthbound,
    SwitchEndpoint,
    grpc_address,
)
from controller.southbound.queues import ThriftEndpoint, ThriftQueueBackend
from controller.southbound.tofino.device_config import (
    DeviceConfigError,
    pack_device_config,
    read_program,
)
from controller.southbound.tofino.southbound import TofinoOptions, TofinoSouthbound
from controller.southbound.tofino.tna_program import missing_tables
from topologies.model import Topology


def check_compatible(topology: Topology, config: ControllerConfig) -> None:
    """Raise ConfigError when the topology or the configuration cannot work with the target."""
    if config.target is Target.LINUX:
        _check_linux(config)
    elif config.target is Target.TOFINO:
        _check_tofino(topology, config)
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
    refusal = linux_path_mode_refusal(config.path_mode)
    if refusal is not None:
        raise ConfigError(f"{refusal} (docs/routing.md)")


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
    _check_grpc(topology, config)


def _check_tofino(topology: Topology, config: ControllerConfig) -> None:
    """The compiled TNA program must be readable and packable before any switch is touched."""
    tofino = config.tofino
    if tofino.program is None:
        raise ConfigError(
            "the tofino target needs tofino.program in the config file: p4c-barefoot's "
            "output directory for the TNA program, built for the switch's SDE (docs/tofino.md)"
        )
    if not tofino.p4info.is_file():
        raise ConfigError(f"TNA P4Info {tofino.p4info} not found (docs/tofino.md)")
    try:
        pack_device_config(read_program(tofino.program), tofino.device_config)
    except DeviceConfigError as error:
        raise ConfigError(f"tofino: {error}") from None
    try:
        tables = [table.name for table in fy.P4Schema(tofino.p4info).tables]
    except Exception as error:  # finsy raises the protobuf parser's own errors
        raise ConfigError(f"TNA P4Info {tofino.p4info}: cannot parse: {error}") from None
    missing = missing_tables(compute_intent(topology, path_mode=config.path_mode).switches, tables)
    if missing:
        raise ConfigError(
            f"{topology.source}: needs tables the TNA program lacks: {', '.join(missing)}"
        )
    _check_grpc(topology, config)


def _check_grpc(topology: Topology, config: ControllerConfig) -> None:
    """Per-switch hosts must name switches of the topology; TLS files must exist."""
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
    if config.target is Target.TOFINO:
        return build_tofino_southbound(topology, config)
    return build_p4runtime_southbound(topology, config)


def _endpoints(topology: Topology, config: ControllerConfig) -> list[SwitchEndpoint]:
    return [
        SwitchEndpoint(
            switch.name,
            grpc_address(config.host_of(switch.name), switch.grpc_port),
            switch.device_id,
        )
        for switch in topology.switches
    ]


def build_tofino_southbound(topology: Topology, config: ControllerConfig) -> TofinoSouthbound:
    """The Tofino southbound for every switch of ``topology``, renumbering by its port map."""
    tofino = config.tofino
    if tofino.program is None:
        raise ConfigError("the tofino target needs tofino.program in the config file")
    options = TofinoOptions(
        program=tofino.program,
        device_config=tofino.device_config,
        p4info=tofino.p4info,
        election_id=config.election_id,
        credentials=_credentials(config.tls),
        max_batch=config.max_batch,
        cells_per_packet=tofino.cells_per_packet,
    )
    device_ports = {switch.name: DevicePorts.of(switch) for switch in topology.switches}
    return TofinoSouthbound(_endpoints(topology, config), options, device_ports)


def build_p4runtime_southbound(topology: Topology, config: ControllerConfig) -> P4RuntimeSouthbound:
    """The P4Runtime southbound for every switch of ``topology``, with Thrift queues."""
    endpoints = _endpoints(topology, config)
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
        topology,
        build_southbound(topology, config),
        log,
        discovery,
        routing=config.routing,
        path_mode=config.path_mode,
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
