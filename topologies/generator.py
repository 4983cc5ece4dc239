"""Parametrised fabrics as topology documents: leaf-spine, fat-tree, and P planes of either.

Documents are minimal: addresses, MACs and service ports are left to the documented derivation
(``topologies.addressing``), so a generated file stays short and reads like a hand-written one.
With P planes every host has P NICs, NIC ``eth<p>`` on plane p, and each plane is its own copy
of the fabric; switch names then carry the plane (``p0l1``, ``p1s2``).

Port numbering (the same in every plane):

* leaf-spine: leaf ports 1..H go to its hosts, H+1..H+S to spines 1..S; spine port i goes to
  leaf i;
* fat-tree k: edge ports 1..k/2 go to hosts, k/2+1..k to the pod's aggregation switches;
  aggregation ports 1..k/2 go to the pod's edges, k/2+1..k to its k/2 core switches; core port
  p goes to pod p.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from topologies.defaults import DEFAULT_CPU_PORT
from topologies.document import Document
from topologies.model import LinkParams, Role

#: Highest port a generated fabric uses: below the CPU port, so that no cable takes it.
MAX_GENERATED_PORT = DEFAULT_CPU_PORT - 1
#: Plane ids are one octet (they are the second octet of the derived IPv4 addresses).
MAX_PLANES = 256


@dataclass
class _PlaneFabric:
    """One plane's switches and links, and where the hosts plug in (in host order)."""

    switches: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    host_ports: list[tuple[str, int]] = field(default_factory=list)


class _DeviceIds:
    """Hands out device ids 1, 2, 3, ... across all planes."""

    def __init__(self) -> None:
        self.last = 0

    def next(self) -> int:
        self.last += 1
        return self.last


def leaf_spine(
    leaves: int,
    spines: int,
    hosts_per_leaf: int,
    *,
    planes: int = 1,
    name: str | None = None,
    link_defaults: LinkParams | None = None,
) -> Document:
    """A 2-tier Clos: every leaf joined to every spine, ``hosts_per_leaf`` hosts on each leaf."""
    _check_positive(leaves=leaves, spines=spines, hosts_per_leaf=hosts_per_leaf, planes=planes)
    _check_port(hosts_per_leaf + spines, "hosts_per_leaf + spines (leaf ports)")
    _check_port(leaves, "leaves (spine ports)")
    ids = _DeviceIds()

    def build(prefix: str, plane: int) -> _PlaneFabric:
        fabric = _PlaneFabric()
        leaf_names = [f"{prefix}l{i}" for i in range(1, leaves + 1)]
        spine_names = [f"{prefix}s{j}" for j in range(1, spines + 1)]
        for leaf in leaf_names:
            fabric.switches.append(_switch(leaf, Role.LEAF, ids.next(), plane, planes))
        for spine in spine_names:
            fabric.switches.append(_switch(spine, Role.SPINE, ids.next(), plane, planes))
        for i, leaf in enumerate(leaf_names, start=1):
            fabric.host_ports += [(leaf, port) for port in range(1, hosts_per_leaf + 1)]
            for j, spine in enumerate(spine_names, start=1):
                fabric.links.append(_link(leaf, hosts_per_leaf + j, spine, i))
        return fabric

    default_name = f"leaf-spine-{leaves}x{spines}x{hosts_per_leaf}"
    return _assemble(build, planes, name or _plane_suffix(default_name, planes), link_defaults)


def fat_tree(
    k: int,
    *,
    planes: int = 1,
    name: str | None = None,
    link_defaults: LinkParams | None = None,
) -> Document:
    """A k-ary fat-tree: k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores."""
    _check_positive(k=k, planes=planes)
    if k % 2:
        raise ValueError(f"fat-tree k must be even, not {k}")
    _check_port(k, "k (switch ports)")
    half = k // 2
    ids = _DeviceIds()

    def build(prefix: str, plane: int) -> _PlaneFabric:
        fabric = _PlaneFabric()
        edges = [[f"{prefix}e{pod * half + i + 1}" for i in range(half)] for pod in range(k)]
        aggs = [[f"{prefix}a{pod * half + i + 1}" for i in range(half)] for pod in range(k)]
        cores = [f"{prefix}c{c + 1}" for c in range(half * half)]
        for pod in range(k):
            for edge in edges[pod]:
                fabric.switches.append(_switch(edge, Role.LEAF, ids.next(), plane, planes))
            for agg in aggs[pod]:
                fabric.switches.append(_switch(agg, Role.AGG, ids.next(), plane, planes))
        for core in cores:
            fabric.switches.append(_switch(core, Role.CORE, ids.next(), plane, planes))
        for pod in range(k):
            for e, edge in enumerate(edges[pod]):
                fabric.host_ports += [(edge, port) for port in range(1, half + 1)]
                for a, agg in enumerate(aggs[pod]):
                    fabric.links.append(_link(edge, half + 1 + a, agg, 1 + e))
            for a, agg in enumerate(aggs[pod]):
                for c in range(half):
                    fabric.links.append(_link(agg, half + 1 + c, cores[a * half + c], pod + 1))
        return fabric

    return _assemble(build, planes, name or _plane_suffix(f"fat-tree-k{k}", planes), link_defaults)


def _assemble(
    build: Callable[[str, int], _PlaneFabric],
    planes: int,
    name: str,
    link_defaults: LinkParams | None,
) -> Document:
    fabrics: list[_PlaneFabric] = [
        build(f"p{plane}" if planes > 1 else "", plane) for plane in range(planes)
    ]
    host_count = len(fabrics[0].host_ports)
    hosts = []
    for host in range(host_count):
        nics = []
        for plane, fabric in enumerate(fabrics):
            switch, port = fabric.host_ports[host]
            nics.append({"name": f"eth{plane}", "switch": switch, "port": port})
        hosts.append({"name": f"h{host + 1}", "nics": nics})
    document: Document = {"name": name}
    if link_defaults is not None:
        document["settings"] = {
            "link_defaults": {
                "bandwidth_mbps": link_defaults.bandwidth_mbps,
                "queue_depth": link_defaults.queue_depth,
                "queue_rate_pps": link_defaults.queue_rate_pps,
            }
        }
    document["planes"] = [{"id": plane} for plane in range(planes)]
    document["switches"] = [switch for fabric in fabrics for switch in fabric.switches]
    document["hosts"] = hosts
    document["links"] = [link for fabric in fabrics for link in fabric.links]
    return document


def _switch(name: str, role: Role, device_id: int, plane: int, planes: int) -> dict[str, Any]:
    switch: dict[str, Any] = {"name": name, "role": role.value, "device_id": device_id}
    if planes > 1:
        switch["plane"] = plane
    return switch


def _link(node_a: str, port_a: int, node_b: str, port_b: int) -> dict[str, Any]:
    return {"a": f"{node_a}:{port_a}", "b": f"{node_b}:{port_b}"}


def _plane_suffix(name: str, planes: int) -> str:
    return name if planes == 1 else f"{name}-{planes}planes"


def _check_positive(**values: int) -> None:
    for what, value in values.items():
        if value < 1:
            raise ValueError(f"{what} must be at least 1, not {value}")
    if values.get("planes", 1) > MAX_PLANES:
        raise ValueError(f"at most {MAX_PLANES} planes, not {values['planes']}")


def _check_port(count: int, what: str) -> None:
    if count > MAX_GENERATED_PORT:
        raise ValueError(f"{what} = {count} needs ports above {MAX_GENERATED_PORT}")
