"""Turning topologies back into YAML documents.

The generator writes minimal documents (addresses and ports left to derivation); the explicit
form below spells out every resolved value, which shows the user what derivation produced and
lets tests prove that the format can express every part of the model (load(dump(t)) == t).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import yaml

from topologies.model import LinkParams, Switch, Topology

Document = dict[str, Any]


def dump_document(document: Document, header: str | None = None) -> str:
    """YAML text of a document: keys in their given order, innermost collections on one line."""
    body = yaml.safe_dump(document, sort_keys=False, default_flow_style=None, width=100)
    if header is None:
        return body
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return comment + body


def explicit_document(topology: Topology) -> Document:
    """Every resolved value of ``topology`` as a document that loads back to an equal topology."""
    settings = topology.settings
    return {
        "name": topology.name,
        "settings": {
            "cpu_port": settings.cpu_port,
            "trim_threshold": settings.trim_threshold,
            "trimming": settings.trimming,
            "ecn": asdict(settings.ecn),
            "dscp": asdict(settings.dscp),
            "lldp": asdict(settings.lldp),
            "link_defaults": _params(settings.link_defaults),
            "high_priority_queue": asdict(settings.high_priority_queue),
            "lossless_queue": asdict(settings.lossless_queue),
        },
        "planes": [
            {
                "id": plane.id,
                "name": plane.name,
                "ipv4_prefix": str(plane.ipv4_prefix),
                "ipv6_prefix": str(plane.ipv6_prefix),
            }
            for plane in topology.planes
        ],
        "switches": [
            {
                "name": switch.name,
                "role": switch.role.value,
                "tier": switch.tier,
                "device_id": switch.device_id,
                "grpc_port": switch.grpc_port,
                "thrift_port": switch.thrift_port,
                "plane": switch.plane,
                **_port_map(switch),
            }
            for switch in topology.switches
        ],
        "hosts": [
            {
                "name": host.name,
                "nics": [
                    {
                        "name": nic.name,
                        "switch": nic.switch,
                        "port": nic.switch_port,
                        "plane": nic.plane,
                        "ipv4": str(nic.ipv4),
                        "ipv6": str(nic.ipv6),
                        "mac": nic.mac,
                        **_params(nic.params),
                    }
                    for nic in host.nics
                ],
            }
            for host in topology.hosts
        ],
        "links": [
            {"a": str(link.a), "b": str(link.b), **_params(link.params)} for link in topology.links
        ],
    }


def _params(params: LinkParams) -> dict[str, float | int]:
    return {
        "bandwidth_mbps": params.bandwidth_mbps,
        "queue_depth": params.queue_depth,
        "queue_rate_pps": params.queue_rate_pps,
    }


def _port_map(switch: Switch) -> dict[str, object]:
    """The port map fields, only where the file gave them (most topologies have none)."""
    fields: dict[str, object] = {}
    if switch.device_ports:
        fields["device_ports"] = [
            {"port": port, "device_port": device} for port, device in switch.device_ports
        ]
    if switch.cpu_device_port is not None:
        fields["cpu_device_port"] = switch.cpu_device_port
    return fields
