"""The device and its ports as a host-API client sees them (``mrc_query_device``,
``mrc_query_port``): the agent's runtime read in OCP's terms, one port per plane."""

from __future__ import annotations

from typing import Any

from agent.api.qp_timing import active_mtu, max_mpr
from agent.api.requests import int_field
from agent.api.resources import MAX_CQE, MAX_WIMM, PROTOCOL_VERSION_1
from agent.api.types import DEVICE_CAP_TRIM_NACK
from agent.io.addresses import format_address
from agent.io.json_lines import Message
from agent.io.runtime import AgentRuntime


class Device:
    """The agent's device: its attributes and its ports' (port ``n`` is plane ``n - 1``)."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self._runtime = runtime
        self.planes = len(runtime.local_addresses)

    def attr(self) -> dict[str, Any]:
        """``mrc_device_attr``."""
        config = self._runtime.pool.default.config
        return {
            "mrc_protocol_version": PROTOCOL_VERSION_1,
            "max_wimm": MAX_WIMM,
            "max_wimm_dest": MAX_WIMM,
            "max_mpr": max_mpr(config.max_psn_window),
            "mpr_resolution": 1,
            "max_qp_hint": 0,
            "cap": DEVICE_CAP_TRIM_NACK,
            "max_qp_wr": config.max_unconfirmed_messages,
            "max_cqe": MAX_CQE,
            "ports": [format_address(a) for a in self._runtime.local_addresses],
        }

    def plane(self, message: Message) -> int:
        """The plane of the request's ``port`` (1-based, as OCP's ``port_num``)."""
        return int_field(message, "port", 1, self.planes, "port_num") - 1

    def port_attr(self, plane: int) -> dict[str, Any]:
        """``mrc_port_attr`` of ``plane``'s port."""
        pool = self._runtime.pool
        return {
            "port_num": plane + 1,
            "state": "ACTIVE" if pool.plane_up(plane) else "DOWN",
            "port_admin_state": "ENABLED" if pool.plane_admin(plane) else "DISABLED",
            "gid": format_address(self._runtime.local_addresses[plane]),
            "active_mtu": active_mtu(pool.default.config.payload_size),
        }

    def query_port(self, message: Message) -> dict[str, Any]:
        """``mrc_query_port``: the attributes of the request's port."""
        return self.port_attr(self.plane(message))
