"""How addresses, MACs and service ports are derived when a topology file leaves them out.

The scheme (also in ``topologies/FORMAT.md``) keeps every derived value readable and unique:

* switch port MAC: ``02:00:DD:DD:PP:PP``, DD:DD the device id and PP:PP the port, both 16-bit;
* host NIC MAC: ``02:10:HH:HH:PL:NN``, HH:HH the host's 1-based position in the file, PL the
  plane, NN the NIC's position in the host's ``nics`` list (0-based);
* plane prefixes: ``10.<plane>.0.0/16`` and ``fd00:<plane>::/32``;
* NIC addresses: ``10.<plane>.<edge>.<port>/24`` and ``fd00:<plane>:<edge>::<port>/64`` (IPv6 groups
  are these numbers written in hex), where ``edge`` numbers the switches of the plane that hosts
  attach to (1-based, file order) and ``port`` is the switch port the NIC is plugged into;
* gRPC port ``50050 + device id`` and Thrift port ``9089 + device id`` (device 1: 50051, 9090).

All MACs are locally administered unicast (first octet 0x02), so they never clash with a real NIC.
"""

from __future__ import annotations

import re
from functools import cache
from ipaddress import IPv4Interface, IPv4Network, IPv6Interface, IPv6Network

#: Largest device id for which a switch's port MACs can be derived (16 bits in the MAC).
MAX_DEVICE_ID = 0xFFFF
GRPC_PORT_BASE = 50050
THRIFT_PORT_BASE = 9089

_MAC_PATTERN = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")


class AddressingError(ValueError):
    """A value cannot be derived (a number is out of range for the scheme) or is malformed."""


@cache
def switch_port_mac(device_id: int, port: int) -> str:
    """The MAC of a switch port: the source MAC of what the switch routes out of it.

    Cached: intent computation asks for the same few MACs once per group member.
    """
    _check_range("device id", device_id, 0, MAX_DEVICE_ID)
    _check_range("port", port, 0, 0xFFFF)
    return _format_mac(0x02, 0x00, device_id >> 8, device_id & 0xFF, port >> 8, port & 0xFF)


def host_nic_mac(host_position: int, plane: int, nic_index: int) -> str:
    """The derived MAC of a host NIC (``host_position`` is 1-based, ``nic_index`` 0-based)."""
    _check_range("host position", host_position, 1, 0xFFFF)
    _check_range("plane", plane, 0, 0xFF)
    _check_range("NIC index", nic_index, 0, 0xFF)
    return _format_mac(0x02, 0x10, host_position >> 8, host_position & 0xFF, plane, nic_index)


def plane_ipv4_prefix(plane: int) -> IPv4Network:
    """The IPv4 supernet of a plane: every NIC address of the plane lies inside it."""
    _check_range("plane", plane, 0, 0xFF)
    return IPv4Network(f"10.{plane}.0.0/16")


def plane_ipv6_prefix(plane: int) -> IPv6Network:
    """The IPv6 supernet of a plane."""
    _check_range("plane", plane, 0, 0xFFFF)
    return IPv6Network(f"fd00:{plane:x}::/32")


def nic_ipv4(plane: int, edge: int, port: int) -> IPv4Interface:
    """Derived IPv4 address of the NIC plugged into ``port`` of the plane's ``edge``-th switch."""
    _check_range("plane", plane, 0, 0xFF)
    _check_range("edge switch number", edge, 1, 0xFF)
    _check_range("switch port", port, 1, 254)
    return IPv4Interface(f"10.{plane}.{edge}.{port}/24")


def nic_ipv6(plane: int, edge: int, port: int) -> IPv6Interface:
    """Derived IPv6 address of the NIC plugged into ``port`` of the plane's ``edge``-th switch."""
    _check_range("plane", plane, 0, 0xFFFF)
    _check_range("edge switch number", edge, 1, 0xFFFF)
    _check_range("switch port", port, 1, 0xFFFF)
    return IPv6Interface(f"fd00:{plane:x}:{edge:x}::{port:x}/64")


def default_grpc_port(device_id: int) -> int:
    """P4Runtime (gRPC) TCP port of a switch whose file gives none."""
    return GRPC_PORT_BASE + device_id


def default_thrift_port(device_id: int) -> int:
    """BMv2 Thrift TCP port (``simple_switch_CLI``) of a switch whose file gives none."""
    return THRIFT_PORT_BASE + device_id


def normalize_mac(text: str) -> str:
    """Lower-case colon form of a unicast MAC; rejects malformed, multicast and all-zero MACs."""
    mac = text.strip().lower().replace("-", ":")
    if not _MAC_PATTERN.match(mac):
        raise AddressingError(f"malformed MAC address {text!r} (expected six hex octets aa:bb:...)")
    first_octet = int(mac[:2], 16)
    if first_octet & 0x01:
        raise AddressingError(f"MAC address {text!r} is multicast; a NIC needs a unicast MAC")
    if mac == "00:00:00:00:00:00":
        raise AddressingError("MAC address 00:00:00:00:00:00 is not usable")
    return mac


def _format_mac(*octets: int) -> str:
    return ":".join(f"{octet:02x}" for octet in octets)


def _check_range(what: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise AddressingError(f"{what} {value} is outside {low}..{high} of the derivation scheme")
