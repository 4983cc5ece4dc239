"""The wiring plan of a run: which veth end gets which name, where it lives, what it joins.

Computed from the topology and the run prefix alone, before anything is created, so that every
name is checked (length, uniqueness) up front and a bad topology fails without side effects.

* A host NIC is one veth: the NIC end in the host's namespace, named as the topology names it,
  and the switch end where the switch kind keeps its ports: in the root namespace, bound by
  BMv2 (``bmv2``), or as ``swpN`` in the switch's own namespace (``kernel``).
* A switch-to-switch link is two veths through the patch panel: each switch's end where its
  ports live, each other end in the patch-panel namespace, the two panel ends joined by a
  bridge. Cutting the link sets the panel ends down, so both switch ends only lose carrier: a
  BMv2-bound interface is never set down (that freezes BMv2, behavioral-model issue 1215), and
  a kernel switch sees exactly what a cable pull shows a real one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from testbed.mininet.naming import (
    bridge_name,
    host_netns,
    kernel_switch_port,
    patch_ifname,
    patch_panel_netns,
    switch_ifname,
    switch_netns,
)
from testbed.mininet.switch_kind import SwitchKind
from topologies.model import Link, LinkId, Nic, Plane, Topology

#: First routing table of a host's per-NIC source rules (one table per NIC, in NIC order).
FIRST_NIC_TABLE = 100


@dataclass(frozen=True)
class HostNicWiring:
    """One host NIC: its veth, the MAC of the switch port behind it, and its routing table."""

    host: str
    nic: Nic
    plane: Plane
    netns: str
    switch_ifname: str
    #: The MAC the host sends everything to (the switch port's): static, no ARP/ND needed.
    gateway_mac: str
    #: Routing table holding this NIC's routes for traffic sourced from its addresses.
    table: int
    link_id: LinkId


@dataclass(frozen=True)
class PatchEnd:
    """One switch's side of a patched link: its root-namespace veth and the panel's end."""

    switch: str
    port: int
    switch_ifname: str
    panel_ifname: str


@dataclass(frozen=True)
class PatchWiring:
    """A switch-to-switch link as two veths joined by a bridge in the patch panel."""

    link: Link
    bridge: str
    ends: tuple[PatchEnd, PatchEnd]


@dataclass(frozen=True)
class Wiring:
    """Every name and connection of one run, derived from the topology and the prefix."""

    prefix: str
    kind: SwitchKind
    patch_panel_netns: str
    #: Per switch, its port numbers and their interfaces: the root-namespace veth ends BMv2
    #: binds (``bmv2``), or ``swpN`` in the switch's namespace (``kernel``).
    switch_ports: dict[str, dict[int, str]]
    #: Per switch, the named namespace its ports live in; None: the root namespace (``bmv2``).
    switch_netns: dict[str, str | None]
    host_nics: tuple[HostNicWiring, ...]
    patches: tuple[PatchWiring, ...]

    def host_netns(self, host: str) -> str:
        """Named namespace of ``host``."""
        return host_netns(self.prefix, host)

    def nics_of(self, host: str) -> tuple[HostNicWiring, ...]:
        """The wiring of ``host``'s NICs, in NIC order."""
        return tuple(wiring for wiring in self.host_nics if wiring.host == host)

    def patch_for(self, link_id: LinkId) -> PatchWiring:
        """The patch of a switch-to-switch link (KeyError for a host link)."""
        return self._patches_by_link[link_id]

    @property
    def host_link_ids(self) -> frozenset[LinkId]:
        """Ids of the host links (cut from the host side; the others at the patch panel)."""
        return frozenset(self._nics_by_link)

    def nic_for(self, link_id: LinkId) -> HostNicWiring:
        """The NIC wiring of a host link (KeyError for a switch-to-switch link)."""
        return self._nics_by_link[link_id]

    @cached_property
    def _patches_by_link(self) -> dict[LinkId, PatchWiring]:
        return {patch.link.id: patch for patch in self.patches}

    @cached_property
    def _nics_by_link(self) -> dict[LinkId, HostNicWiring]:
        return {wiring.link_id: wiring for wiring in self.host_nics}


def plan_wiring(topology: Topology, prefix: str, kind: SwitchKind = SwitchKind.BMV2) -> Wiring:
    """The wiring of ``topology`` for the run ``prefix`` with ``kind`` switches (NamingError
    if a name cannot fit)."""
    switch_ports = _switch_ports(topology, prefix, kind)
    host_nics = []
    for host in topology.hosts:
        for table_offset, nic in enumerate(host.nics):
            switch = topology.switch(nic.switch)
            host_nics.append(
                HostNicWiring(
                    host=host.name,
                    nic=nic,
                    plane=topology.plane(nic.plane),
                    netns=host_netns(prefix, host.name),
                    switch_ifname=switch_ports[nic.switch][nic.switch_port],
                    gateway_mac=switch.port_mac(nic.switch_port),
                    table=FIRST_NIC_TABLE + table_offset,
                    link_id=host.link(nic).id,
                )
            )
    patches = []
    for index, link in enumerate(topology.links):
        ends = tuple(
            PatchEnd(
                switch=end.node,
                port=end.port,
                switch_ifname=switch_ports[end.node][end.port],
                panel_ifname=patch_ifname(end.node, end.port),
            )
            for end in (link.a, link.b)
        )
        patches.append(PatchWiring(link=link, bridge=bridge_name(index), ends=(ends[0], ends[1])))
    wiring = Wiring(
        prefix=prefix,
        kind=kind,
        patch_panel_netns=patch_panel_netns(prefix),
        switch_ports=switch_ports,
        switch_netns={
            switch.name: switch_netns(prefix, switch.name) if kind.in_own_namespace else None
            for switch in topology.switches
        },
        host_nics=tuple(host_nics),
        patches=tuple(patches),
    )
    _check_unique(wiring)
    return wiring


def _switch_ports(topology: Topology, prefix: str, kind: SwitchKind) -> dict[str, dict[int, str]]:
    """Each switch's port numbers and the interface names they get with ``kind`` switches."""
    if kind is SwitchKind.KERNEL:
        return {
            switch.name: {
                port: kernel_switch_port(port) for port in topology.switch_ports(switch.name)
            }
            for switch in topology.switches
        }
    positions = {switch.name: index for index, switch in enumerate(topology.switches, start=1)}
    return {
        switch.name: {
            port: switch_ifname(prefix, switch.name, positions[switch.name], port)
            for port in topology.switch_ports(switch.name)
        }
        for switch in topology.switches
    }


def _check_unique(wiring: Wiring) -> None:
    """Root-namespace names must be unique on the machine, panel names within the panel (a
    kernel switch's ``swpN`` are unique within its own namespace by construction)."""
    root_names = [
        name
        for switch, ports in wiring.switch_ports.items()
        if wiring.switch_netns[switch] is None
        for name in ports.values()
    ]
    panel_names = [end.panel_ifname for patch in wiring.patches for end in patch.ends]
    for what, names in (("root-namespace", root_names), ("patch-panel", panel_names)):
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"{what} interface names are not unique: {', '.join(duplicates)}")
