"""The commands that make a host NIC usable at once, without ARP or IPv6 neighbour discovery.

BMv2 answers neither ARP nor ND, so every host sends all its traffic to the MAC of the switch
port its NIC is plugged into, through a static (permanent) neighbour entry for a gateway
address that exists only on the host: ``169.254.0.1`` reached ``onlink`` for IPv4 and
``fe80::1`` for IPv6. The switch routes on the destination address and rewrites the MACs.

Addresses are added with ``noprefixroute``: with a connected /24 route a host would look for
a same-leaf neighbour on the wire (ARP, unanswered); instead the whole plane prefix goes to
the gateway, and the switch delivers same-leaf traffic too. A host with several NICs on one
plane also gets one routing table per NIC and a source rule, so that traffic from a NIC's
address leaves through that NIC (MRC binds connections to NICs).

IPv6 duplicate address detection is off (``nodad`` and ``accept_dad=0``), so addresses are
usable immediately rather than tentative for a second; router advertisements and
solicitations are off because nothing on the fabric sends or answers them;
``keep_addr_on_down`` keeps the IPv6 addresses across a cut. Offloads are off on both veth
ends: with them, the kernel hands BMv2 frames with unfinished checksums or merged segments.

Everything here only builds argument lists; ``TestbedHost`` runs them in the host's namespace.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address

from testbed.mininet.wiring import HostNicWiring
from topologies.paths import usid_block

GATEWAY_IPV4 = IPv4Address("169.254.0.1")
GATEWAY_IPV6 = IPv6Address("fe80::1")
#: The offloads turned off on both ends of every veth of a run.
OFFLOAD_FEATURES = ("rx", "tx", "sg", "tso", "gso", "gro")
#: Priority of the first NIC's source rule (below the kernel's main-table rule, 32766).
FIRST_RULE_PRIORITY = 1000

Command = tuple[str, ...]


def sysctl(key: str, value: int | str) -> Command:
    """Set one sysctl quietly (the key is dotted; interface names here contain no dots)."""
    return ("sysctl", "-qw", f"{key}={value}")


def offloads_off(ifname: str) -> Command:
    """Turn off the checksum, scatter-gather and segmentation offloads of one interface."""
    features: list[str] = []
    for feature in OFFLOAD_FEATURES:
        features += [feature, "off"]
    return ("ethtool", "-K", ifname, *features)


def host_sysctls() -> list[Command]:
    """Host-wide settings: no reverse-path filter (a NIC may receive replies for another's
    address when two NICs share a plane) and DAD off for interfaces made later."""
    return [
        sysctl("net.ipv4.conf.all.rp_filter", 0),
        sysctl("net.ipv4.conf.default.rp_filter", 0),
        sysctl("net.ipv6.conf.all.accept_dad", 0),
        sysctl("net.ipv6.conf.default.accept_dad", 0),
    ]


def nic_prepare(wiring: HostNicWiring) -> list[Command]:
    """Before the NIC goes up: its per-interface settings and offloads."""
    name = wiring.nic.name
    return [
        sysctl(f"net.ipv4.conf.{name}.rp_filter", 0),
        sysctl(f"net.ipv6.conf.{name}.accept_dad", 0),
        sysctl(f"net.ipv6.conf.{name}.dad_transmits", 0),
        sysctl(f"net.ipv6.conf.{name}.accept_ra", 0),
        sysctl(f"net.ipv6.conf.{name}.router_solicitations", 0),
        sysctl(f"net.ipv6.conf.{name}.keep_addr_on_down", 1),
        offloads_off(name),
    ]


def nic_bring_up(wiring: HostNicWiring) -> list[Command]:
    """Up, addresses, gateway neighbours and routes; idempotent, so a restored NIC reruns it
    (setting a NIC down flushes its routes and neighbour entries)."""
    nic, plane, name = wiring.nic, wiring.plane, wiring.nic.name
    table = str(wiring.table)
    commands: list[Command] = [
        ("ip", "link", "set", "dev", name, "up"),
        ("ip", "-4", "addr", "replace", str(nic.ipv4), "dev", name, "noprefixroute"),
        ("ip", "-6", "addr", "replace", str(nic.ipv6), "dev", name, "noprefixroute", "nodad"),
    ]
    for gateway in (GATEWAY_IPV4, GATEWAY_IPV6):
        commands.append(
            (
                "ip",
                f"-{gateway.version}",
                "neigh",
                "replace",
                str(gateway),
                "lladdr",
                wiring.gateway_mac,
                "dev",
                name,
                "nud",
                "permanent",
            )
        )
    for route_table in ("main", table):
        commands += [
            (
                "ip",
                "-4",
                "route",
                "replace",
                str(plane.ipv4_prefix),
                "via",
                str(GATEWAY_IPV4),
                "dev",
                name,
                "onlink",
                "src",
                str(nic.ipv4.ip),
                "metric",
                str(wiring.table),
                "table",
                route_table,
            ),
        ]
        # The plane's prefix, and its SRv6 uSID block: carriers (SRv6 path mode) leave by
        # the plane's NIC like any other packet toward the plane.
        for prefix in (plane.ipv6_prefix, usid_block(nic.plane)):
            commands.append(
                (
                    "ip",
                    "-6",
                    "route",
                    "replace",
                    str(prefix),
                    "via",
                    str(GATEWAY_IPV6),
                    "dev",
                    name,
                    "src",
                    str(nic.ipv6.ip),
                    "metric",
                    str(wiring.table),
                    "table",
                    route_table,
                )
            )
    return commands


def nic_source_rules(wiring: HostNicWiring) -> list[Command]:
    """Source rules sending traffic from the NIC's addresses through the NIC's own table.

    Rules do not depend on the link state, so they are added once, at bring-up.
    """
    priority = str(FIRST_RULE_PRIORITY + wiring.table)
    return [
        (
            "ip",
            f"-{address.version}",
            "rule",
            "add",
            "from",
            str(address),
            "lookup",
            str(wiring.table),
            "priority",
            priority,
        )
        for address in (wiring.nic.ipv4.ip, wiring.nic.ipv6.ip)
    ]


def nic_down(wiring: HostNicWiring) -> list[Command]:
    """Cut the NIC's link from the host side: the switch end then reads carrier loss."""
    return [("ip", "link", "set", "dev", wiring.nic.name, "down")]
