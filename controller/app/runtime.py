"""Assemble and run a controller for a topology: southbound, queues, fabric logic, status socket.

The target picks the southbound, the check of the configuration and how links are found: each
is declared once by the target (``controller.targets``): ``bmv2`` is P4Runtime with Thrift
queues and LLDP link discovery; ``linux`` is netlink into one namespace per switch, with link
state from carrier; ``tofino`` is P4Runtime to Tofino switches (the TNA program, the topology's
port map, LLDP).

``run_controller`` is what ``mrc-controller run`` does after parsing its arguments; it returns
when cancelled (Ctrl-C, SIGTERM), after closing every channel and removing the status socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

from controller.app.config import ConfigError, ControllerConfig
from controller.app.discovery import discovery_settings
from controller.app.eventlog import EventLog
from controller.app.fabric import FabricController
from controller.app.peer import follow_peer
from controller.app.status import collect_status
from controller.app.status_socket import EventFeed, serve_status
from controller.app.watch import describe_topology
from controller.southbound.interface import LinkEvidence, Southbound
from controller.southbound.target import TargetSettingsError
from controller.targets import controller_target
from topologies.model import Topology


def check_compatible(topology: Topology, config: ControllerConfig) -> None:
    """Raise ConfigError when the topology or the configuration cannot work with the target."""
    try:
        controller_target(config.target).check(topology, config)
    except TargetSettingsError as error:
        raise ConfigError(str(error)) from None


def build_southbound(topology: Topology, config: ControllerConfig) -> Southbound:
    """The southbound of the configured target for every switch of ``topology``."""
    try:
        southbound: Southbound = controller_target(config.target).build(topology, config)
    except TargetSettingsError as error:
        raise ConfigError(str(error)) from None
    return southbound


def build_fabric(topology: Topology, config: ControllerConfig, log: EventLog) -> FabricController:
    """The controller logic for ``topology`` over the configured target's southbound."""
    discovery = discovery_settings(
        topology,
        enabled=config.discovery,
        evidence=controller_target(config.target).capabilities.link_evidence,
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


def _peer_follower(fabric: FabricController, config: ControllerConfig) -> asyncio.Task[None] | None:
    """Where links are watched by probes, which a backup cannot send, follow the other
    controller's link state (``controller.app.peer``); None where there is nothing to do."""
    if config.peer_socket is None or not fabric.discovery.watches(LinkEvidence.PROBES):
        return None
    return asyncio.create_task(follow_peer(fabric, config.peer_socket))


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
    follower = _peer_follower(fabric, config)
    try:
        await fabric.run()
    except asyncio.CancelledError:
        pass
    finally:
        if follower is not None:
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)
        for signum in stop_signals:
            loop.remove_signal_handler(signum)
        server.close()
        with contextlib.suppress(Exception):
            await server.wait_closed()
        with contextlib.suppress(FileNotFoundError):
            config.status_socket.unlink()
