"""Topology port numbers to a device's own, and back: the port map of hardware switches.

The intent numbers ports as the topology does; a Tofino switch numbers them as its SDK (or
Stratum's chassis config) does. The P4Runtime southbound renumbers at its edge, so the intent
and everything above it never see a device number: entities going down carry device ports,
packet-ins coming up are reported on topology ports, counters are read by device port and
reported by topology port.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from controller.intent.model import NextHopMember, SwitchIntent
from topologies.model import Switch


@dataclass(frozen=True)
class DevicePorts:
    """One switch's port map (topology port -> device port) and its device CPU port.

    A port the map does not name keeps its number: a switch without a map is unchanged.
    """

    to_device_map: tuple[tuple[int, int], ...] = ()
    cpu_port: int | None = None

    def __post_init__(self) -> None:
        devices = [device for _, device in self.to_device_map]
        if len(set(devices)) != len(devices):
            raise ValueError(f"two ports share a device port in {self.to_device_map}")

    @classmethod
    def of(cls, switch: Switch) -> DevicePorts:
        """The map the topology gives ``switch``."""
        return cls(switch.device_ports, switch.cpu_device_port)

    @property
    def identity(self) -> bool:
        """Whether every number stays as it is."""
        return not self.to_device_map and self.cpu_port is None

    def to_device(self, port: int) -> int:
        """The device's number of topology ``port``."""
        return dict(self.to_device_map).get(port, port)

    def from_device(self, device_port: int) -> int | None:
        """The topology port of ``device_port``; None for a device port outside a non-empty
        map (the topology maps every port it uses, so that one is none of them)."""
        if not self.to_device_map:
            return device_port
        for port, device in self.to_device_map:
            if device == device_port:
                return port
        return None

    def ports_to_device(self, ports: Iterable[int]) -> dict[int, int]:
        """Each topology port of ``ports`` with its device number."""
        return {port: self.to_device(port) for port in ports}

    def intent(self, intent: SwitchIntent) -> SwitchIntent:
        """``intent`` with every port number a device number (the CPU port too, if given)."""
        if self.identity:
            return intent
        return replace(
            intent,
            cpu_port=intent.cpu_port if self.cpu_port is None else self.cpu_port,
            ports=tuple(replace(port, port=self.to_device(port.port)) for port in intent.ports),
            members=tuple(self._member(member) for member in intent.members),
            groups=tuple(
                replace(group, members=tuple(self._member(member) for member in group.members))
                for group in intent.groups
            ),
            ev_uplinks=tuple(
                replace(uplink, egress_port=self.to_device(uplink.egress_port))
                for uplink in intent.ev_uplinks
            ),
            usid_next_hops=tuple(
                replace(hop, egress_port=self.to_device(hop.egress_port))
                for hop in intent.usid_next_hops
            ),
        )

    def _member(self, member: NextHopMember) -> NextHopMember:
        return replace(
            member,
            egress_port=self.to_device(member.egress_port),
            watch_port=self.to_device(member.watch_port),
        )
