"""Second loading stage: cross-check the parsed items and build the resolved :class:`Topology`.

Checks here need more than one item: unique names, device ids and service ports; links and NICs
that name existing switches on free ports of the same plane; addresses inside their plane and
used once; MACs used once; queues deep enough for the trimming threshold, and the lossless
RoCE class's for ECN marking to reach its maximum before it fills. Omitted NIC addresses
and MACs are derived here (``topologies.addressing``) because the scheme needs the whole file.
"""

from __future__ import annotations

from dataclasses import dataclass

from topologies.addressing import (
    AddressingError,
    host_nic_mac,
    nic_ipv4,
    nic_ipv6,
)
from topologies.errors import ProblemLog
from topologies.model import (
    Endpoint,
    Host,
    Link,
    Nic,
    Plane,
    Settings,
    Switch,
    Topology,
)
from topologies.parse import HostSpec, Located, NicSpec, ParsedDocument, device_port_key


@dataclass(frozen=True)
class _Use:
    """Who holds a unique value (a name, a port, an address), for 'already used by' messages."""

    owner: str
    line: int


class _Registry:
    """Values that must be unique across the file; a second use is a problem at its line."""

    def __init__(self, what: str, log: ProblemLog) -> None:
        self.what = what
        self.log = log
        self.uses: dict[object, _Use] = {}

    def claim(self, value: object, owner: str, line: int) -> bool:
        first = self.uses.get(value)
        if first is not None:
            self.log.add(
                line,
                f"{owner}: {self.what} {value} is already used by {first.owner} "
                f"(line {first.line})",
            )
            return False
        self.uses[value] = _Use(owner, line)
        return True


def assemble_topology(doc: ParsedDocument, source: str, log: ProblemLog) -> Topology:
    """Cross-check ``doc`` and build the topology; problems go to ``log``, which is raised."""
    settings = doc.settings.item
    _check_planes(doc.planes, log)
    plane_ids = {plane.item.id for plane in doc.planes}
    switches = {switch.item.name: switch.item for switch in doc.switches}
    _check_switches(doc, plane_ids, log)
    ports = _Registry("port", log)
    links = _check_links(doc, switches, settings, ports, log)
    hosts = _build_hosts(doc, switches, settings, ports, log)
    _check_port_maps(doc, ports, log)
    _check_queue_depths(doc, log)
    _check_lossless_queue(doc, log)
    log.raise_if_any()
    return Topology(
        name=doc.name,
        settings=settings,
        planes=tuple(plane.item for plane in doc.planes),
        switches=tuple(switch.item for switch in doc.switches),
        hosts=hosts,
        links=links,
        source=source,
    )


def _check_planes(planes: tuple[Located[Plane], ...], log: ProblemLog) -> None:
    ids = _Registry("plane id", log)
    names = _Registry("plane name", log)
    for located in planes:
        plane = located.item
        owner = f"plane {plane.id}"
        ids.claim(plane.id, owner, located.line("id"))
        names.claim(plane.name, owner, located.line("name"))
    for index, located in enumerate(planes):
        for earlier in planes[:index]:
            for key in ("ipv4_prefix", "ipv6_prefix"):
                mine, theirs = getattr(located.item, key), getattr(earlier.item, key)
                if mine.overlaps(theirs):
                    log.add(
                        located.line(key),
                        f"plane {located.item.id}: {key} {mine} overlaps plane "
                        f"{earlier.item.id}'s {theirs} (line {earlier.line(key)})",
                    )


def _check_switches(doc: ParsedDocument, plane_ids: set[int], log: ProblemLog) -> None:
    names = _Registry("name", log)
    device_ids = _Registry("device_id", log)
    service_ports = _Registry("TCP port", log)
    for located in doc.switches:
        switch = located.item
        owner = f"switch {switch.name!r}"
        names.claim(switch.name, owner, located.line("name"))
        device_ids.claim(switch.device_id, owner, located.line("device_id"))
        service_ports.claim(switch.grpc_port, f"{owner} grpc_port", located.line("grpc_port"))
        service_ports.claim(switch.thrift_port, f"{owner} thrift_port", located.line("thrift_port"))
        if switch.plane not in plane_ids:
            log.add(
                located.line("plane"),
                f"{owner}: unknown plane {switch.plane} (planes: {sorted(plane_ids)})",
            )
    for host in doc.hosts:
        names.claim(host.item.name, f"host {host.item.name!r}", host.line("name"))


def _check_links(
    doc: ParsedDocument,
    switches: dict[str, Switch],
    settings: Settings,
    ports: _Registry,
    log: ProblemLog,
) -> tuple[Link, ...]:
    host_names = {host.item.name for host in doc.hosts}
    links = []
    for located in doc.links:
        link = located.item
        owner = f"link {link.a}-{link.b}"
        good = True
        for key, end in (("a", link.a), ("b", link.b)):
            if end.node in host_names:
                log.add(
                    located.line(key),
                    f"{owner}: {end.node!r} is a host; hosts attach through their NICs' "
                    "'switch' and 'port' fields, not through links",
                )
                good = False
            elif end.node not in switches:
                log.add(located.line(key), f"{owner}: unknown node {end.node!r}")
                good = False
            elif not _claim_switch_port(end, owner, located.line(key), settings, ports, log):
                good = False
        if not good:
            continue
        if link.a.node == link.b.node:
            log.add(located.line("b"), f"{owner}: a link cannot join a switch to itself")
            continue
        plane_a, plane_b = switches[link.a.node].plane, switches[link.b.node].plane
        if plane_a != plane_b:
            log.add(
                located.line(),
                f"{owner}: joins plane {plane_a} to plane {plane_b}; planes are separate fabrics",
            )
            continue
        links.append(link)
    return tuple(links)


def _claim_switch_port(
    end: Endpoint, owner: str, line: int, settings: Settings, ports: _Registry, log: ProblemLog
) -> bool:
    if end.port == settings.cpu_port:
        log.add(line, f"{owner}: port {end.port} of {end.node!r} is the CPU port")
        return False
    return ports.claim(end, owner, line)


def _edge_numbers(doc: ParsedDocument, switches: dict[str, Switch]) -> dict[str, int]:
    """Number, per plane and in file order, the switches that hosts attach to (from 1)."""
    attached = {nic.item.switch for host in doc.hosts for nic in host.item.nics}
    numbers: dict[str, int] = {}
    per_plane: dict[int, int] = {}
    for located in doc.switches:
        switch = located.item
        if switch.name in attached and switch.name not in numbers:
            per_plane[switch.plane] = per_plane.get(switch.plane, 0) + 1
            numbers[switch.name] = per_plane[switch.plane]
    return numbers


def _build_hosts(
    doc: ParsedDocument,
    switches: dict[str, Switch],
    settings: Settings,
    ports: _Registry,
    log: ProblemLog,
) -> tuple[Host, ...]:
    planes = {plane.item.id: plane.item for plane in doc.planes}
    edge_numbers = _edge_numbers(doc, switches)
    built = [
        (
            located_host,
            _build_nics(
                located_host, position, switches, planes, edge_numbers, settings, ports, log
            ),
        )
        for position, located_host in enumerate(doc.hosts, start=1)
    ]
    # Every port is claimed by now, so every switch port MAC in use is known.
    macs = _Registry("MAC", log)
    switch_lines = {located.item.name: located.line() for located in doc.switches}
    for end in ports.uses:
        if isinstance(end, Endpoint):
            switch = switches[end.node]
            owner = f"switch {switch.name!r} port {end.port}"
            macs.claim(switch.port_mac(end.port), owner, switch_lines[switch.name])
    addresses = _Registry("address", log)
    hosts = []
    for located_host, nics in built:
        for nic, located_nic in nics:
            owner = f"host {located_host.item.name!r} NIC {nic.name!r}"
            addresses.claim(nic.ipv4.ip, owner, located_nic.line("ipv4"))
            addresses.claim(nic.ipv6.ip, owner, located_nic.line("ipv6"))
            macs.claim(nic.mac, owner, located_nic.line("mac"))
        hosts.append(Host(located_host.item.name, tuple(nic for nic, _ in nics)))
    return tuple(hosts)


def _build_nics(
    located_host: Located[HostSpec],
    position: int,
    switches: dict[str, Switch],
    planes: dict[int, Plane],
    edge_numbers: dict[str, int],
    settings: Settings,
    ports: _Registry,
    log: ProblemLog,
) -> list[tuple[Nic, Located[NicSpec]]]:
    host = located_host.item
    nic_names = _Registry("NIC name", log)
    built = []
    for index, located in enumerate(host.nics):
        spec = located.item
        owner = f"host {host.name!r} NIC {spec.name!r}"
        nic_names.claim(spec.name, f"host {host.name!r}", located.line("name"))
        switch = switches.get(spec.switch)
        if switch is None:
            log.add(located.line("switch"), f"{owner}: unknown switch {spec.switch!r}")
            continue
        attachment = Endpoint(spec.switch, spec.port)
        if not _claim_switch_port(attachment, owner, located.line("port"), settings, ports, log):
            continue
        if spec.plane is not None and spec.plane != switch.plane:
            log.add(
                located.line("plane"),
                f"{owner}: plane {spec.plane} differs from switch {switch.name!r}'s plane "
                f"{switch.plane}",
            )
            continue
        plane = planes.get(switch.plane)
        if plane is None:
            continue  # the switch's unknown plane is already reported
        try:
            nic = Nic(
                name=spec.name,
                index=index,
                switch=spec.switch,
                switch_port=spec.port,
                plane=switch.plane,
                ipv4=spec.ipv4 or nic_ipv4(plane.id, edge_numbers[switch.name], spec.port),
                ipv6=spec.ipv6 or nic_ipv6(plane.id, edge_numbers[switch.name], spec.port),
                mac=spec.mac or host_nic_mac(position, plane.id, index),
                params=spec.params,
            )
        except AddressingError as error:
            log.add(
                located.line(),
                f"{owner}: cannot derive its addresses ({error}); give ipv4, ipv6 and mac",
            )
            continue
        if not _inside_plane(nic, plane, owner, located, log):
            continue
        built.append((nic, located))
    return built


def _inside_plane(
    nic: Nic, plane: Plane, owner: str, located: Located[NicSpec], log: ProblemLog
) -> bool:
    outside = []
    if not nic.ipv4.network.subnet_of(plane.ipv4_prefix):
        outside.append(("ipv4", str(nic.ipv4), str(plane.ipv4_prefix)))
    if not nic.ipv6.network.subnet_of(plane.ipv6_prefix):
        outside.append(("ipv6", str(nic.ipv6), str(plane.ipv6_prefix)))
    for key, interface, prefix in outside:
        log.add(
            located.line(key),
            f"{owner}: {key} {interface} is not inside plane {plane.id}'s prefix {prefix}",
        )
    return not outside


def _check_port_maps(doc: ParsedDocument, ports: _Registry, log: ProblemLog) -> None:
    """A switch with a port map maps exactly the ports its links and NICs use, and its CPU
    port is none of theirs: a port left out would be written to the device under the
    topology's number, which names some other port there."""
    used: dict[str, dict[int, str]] = {}
    for end, use in ports.uses.items():
        if isinstance(end, Endpoint):
            used.setdefault(end.node, {})[end.port] = use.owner
    for located in doc.switches:
        switch = located.item
        owner = f"switch {switch.name!r}"
        in_use = used.get(switch.name, {})
        mapped = dict(switch.device_ports)
        if mapped:
            for port in sorted(set(mapped) - set(in_use)):
                log.add(
                    located.line(device_port_key(port)),
                    f"{owner}: device_ports maps port {port}, which no link or NIC uses",
                )
            for port in sorted(set(in_use) - set(mapped)):
                log.add(
                    located.line("device_ports"),
                    f"{owner}: device_ports has no entry for port {port} ({in_use[port]})",
                )
        cpu = switch.cpu_device_port
        if cpu is not None and cpu in mapped.values():
            log.add(
                located.line("cpu_device_port"),
                f"{owner}: cpu_device_port {cpu} is also the device port of a switch port",
            )


def _check_queue_depths(doc: ParsedDocument, log: ProblemLog) -> None:
    """Every egress queue must be deeper than the trimming threshold.

    The defaults are checked once, at the settings; a link or NIC is checked only where it sets
    its own ``queue_depth``, so one bad default does not produce a problem per link.
    """
    threshold = doc.settings.item.trim_threshold
    checks = [
        (
            "settings link_defaults",
            doc.settings.line("link_defaults"),
            doc.settings.item.link_defaults,
        )
    ]
    checks += [
        (f"link {link.item.a}-{link.item.b}", link.line("queue_depth"), link.item.params)
        for link in doc.links
        if "queue_depth" in link.lines
    ]
    checks += [
        (f"host {host.item.name!r} NIC {nic.item.name!r}", nic.line("queue_depth"), nic.item.params)
        for host in doc.hosts
        for nic in host.item.nics
        if "queue_depth" in nic.lines
    ]
    for owner, line, params in checks:
        if params.queue_depth <= threshold:
            log.add(
                line,
                f"{owner}: queue_depth {params.queue_depth} must be above trim_threshold "
                f"{threshold}, or the queue overflows before trimming starts",
            )


def _check_lossless_queue(doc: ParsedDocument, log: ProblemLog) -> None:
    """The lossless RoCE class's queue must be deeper than ECN's ``max_threshold``: DCQCN is
    all that shortens it (no pause frame stops its senders), and a queue that filled before
    every packet joining it is marked would drop RoCE data at its tail instead."""
    settings = doc.settings.item
    depth = settings.lossless_queue.depth
    if depth <= settings.ecn.max_threshold:
        log.add(
            doc.settings.line("lossless_queue"),
            f"settings lossless_queue: depth {depth} must be above ecn max_threshold "
            f"{settings.ecn.max_threshold}, or the lossless RoCE class fills before DCQCN's "
            "marks are certain",
        )
