"""A client's controller operations in the agent (``mrc_ctl.h``) beyond the profiles: the
device's controller attributes, a port's admin state, and EV probes. Only privileged clients
reach them (``agent.api.session`` checks); the profiles are ``agent.api.profile_ops``'."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.api.device import Device
from agent.api.errors import InvalidArgument, NotSupported
from agent.api.outbox import Outbox
from agent.api.probes import EvProbes
from agent.api.profiles import ProfileRegistry
from agent.api.requests import (
    U16,
    address_field,
    enum_field,
    ev_field,
    int_field,
    list_field,
    required,
)
from agent.api.resources import MAX_PROBE_TIMEOUT_NS, PROTOCOL_VERSION_1
from agent.api.types import EventType, FormatMode, PortAdminState
from agent.core.ev_expansion import ProfileError, wire_ev
from agent.io.addresses import format_address
from agent.io.json_lines import Message
from agent.io.runtime import AgentRuntime

#: An asynchronous event (kind, element, reason) to every client of the agent.
TellAll = Callable[[EventType, int, str], None]


class ControllerOps:
    """One privileged client's controller operations on the device, its ports and probes."""

    def __init__(
        self,
        runtime: AgentRuntime,
        device: Device,
        registry: ProfileRegistry,
        probes: EvProbes,
        outbox: Outbox,
        tell_all: TellAll,
    ) -> None:
        self._runtime = runtime
        self._device = device
        self._registry = registry
        self._probes = probes
        self._outbox = outbox
        self._tell_all = tell_all

    def query_device(self) -> dict[str, Any]:
        registry = self._registry
        return {
            "mrc_ctl_protocol_version": PROTOCOL_VERSION_1,
            **registry.limits.to_json(registry.free_evs()),
            "phy_port_mask": sum(1 << port for port in range(1, self._device.planes + 1)),
        }

    def modify_port(self, message: Message) -> dict[str, Any]:
        """A port's admin state; every client hears of its port going up or down."""
        plane = self._device.plane(message)
        state = enum_field(
            PortAdminState, required(message, "port_admin_state"), "port_admin_state"
        )
        pool = self._runtime.pool
        was_up = pool.plane_up(plane)
        pool.set_plane_admin(plane, state is PortAdminState.ENABLED)
        now_up = pool.plane_up(plane)
        if now_up != was_up:
            kind = EventType.PORT_ACTIVE if now_up else EventType.PORT_ERR
            self._tell_all(kind, plane + 1, f"port {plane + 1} admin {state.name}")
        self._runtime.service()
        return self._device.port_attr(plane)

    def ep_batch(self, request: int, message: Message) -> None:
        """EV probes, answered once all are (``agent.api.probes``)."""
        int_field(message, "req_tc", 0, 63)
        if message.get("op_type", 0) != 0:
            raise NotSupported("only EV probes (op_type 0) are offered", "op_type")
        timeout = int_field(message, "rsp_timeout", 1, MAX_PROBE_TIMEOUT_NS)
        raws = list_field(message, "req", 4096)
        if not raws:
            raise InvalidArgument("no request", "req")
        probes: list[tuple[int, int, bytes, int]] = []
        ids: set[int] = set()
        local = self._runtime.local_addresses
        planes = self._device.planes
        for index, raw in enumerate(raws):
            where = f"req[{index}]"
            if not isinstance(raw, dict):
                raise InvalidArgument("must be an object", where)
            req_id = int_field(raw, "req_id", 0, U16, f"{where}.req_id")
            if req_id in ids:
                raise InvalidArgument(f"req_id {req_id} is used twice", f"{where}.req_id")
            ids.add(req_id)
            ev = ev_field(raw.get("req_ev"), f"{where}.req_ev")
            if not 1 <= ev.port <= planes:
                raise InvalidArgument(f"ports are 1-{planes}", f"{where}.req_ev.port")
            plane = ev.port - 1
            mode = enum_field(FormatMode, raw.get("ev_fmt_mode", "STEV"), f"{where}.ev_fmt_mode")
            try:
                value = wire_ev(mode, ev.padded(), self._runtime.ipv6)
            except ProfileError as exc:
                error = NotSupported if mode is FormatMode.SRV6 else InvalidArgument
                raise error(exc.reason, f"{where}.req_ev") from None
            peer = address_field(raw.get("dgid"), f"{where}.dgid", len(local[0]))
            if raw.get("sgid") is not None:
                source = address_field(raw["sgid"], f"{where}.sgid", len(local[0]))
                if source != local[plane]:
                    raise InvalidArgument(
                        f"{format_address(source)} is not port {ev.port}'s address "
                        f"({format_address(local[plane])})",
                        f"{where}.sgid",
                    )
            probes.append((req_id, plane, peer, value))
        self._probes.start(self._outbox, request, probes, timeout)

    def release(self) -> None:
        """The client is gone: its probes' answers go nowhere."""
        self._probes.forget(self._outbox)
