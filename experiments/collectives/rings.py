"""Where a collective job's ranks sit, and what the links between them allow: rings ordered
across the leaves, so that every step of every rank crosses the spines."""

from __future__ import annotations

from experiments.collectives.modes import Params, cut_ends
from topologies.model import Role, Topology


def ring_across_leaves(topology: Topology, leaf_order: tuple[int, ...] | None = None) -> list[str]:
    """Every host, taking one from each leaf in turn (leaves in ``leaf_order`` of their
    sorted list), so that consecutive ranks sit on different leaves."""
    by_leaf: dict[str, list[str]] = {}
    for host in topology.hosts:
        by_leaf.setdefault(host.nics[0].switch, []).append(host.name)
    leaves = sorted(by_leaf, key=_natural)
    if leaf_order is not None:
        leaves = [leaves[i] for i in leaf_order if i < len(leaves)]
    for leaf in leaves:
        by_leaf[leaf].sort(key=_natural)
    ring: list[str] = []
    for index in range(max(len(hosts) for hosts in by_leaf.values())):
        ring.extend(by_leaf[leaf][index] for leaf in leaves if index < len(by_leaf[leaf]))
    return ring


def _natural(name: str) -> tuple[str, int]:
    digits = name.lstrip("abcdefghijklmnopqrstuvwxyz")
    return (name[: len(name) - len(digits)], int(digits) if digits.isdigit() else 0)


def second_ring(topology: Topology) -> list[str]:
    """The second job's ring: leaves taken every other one (l1, l3, l2, l4, ...)."""
    count = len({host.nics[0].switch for host in topology.hosts})
    order = tuple(range(0, count, 2)) + tuple(range(1, count, 2))
    return ring_across_leaves(topology, order)


def job_hosts(topology: Topology, params: Params) -> list[str]:
    """The ranks' hosts, in ring order."""
    if params.hosts:
        return [h.strip() for h in params.hosts.split(",") if h.strip()]
    return ring_across_leaves(topology)


def check_topology(topology: Topology, params: Params) -> None:
    """The hosts exist, the cut link exists and joins a spine to a leaf."""
    hosts = job_hosts(topology, params)
    names = {host.name for host in topology.hosts}
    unknown = [h for h in hosts if h not in names]
    if unknown or len(hosts) < 2 or len(set(hosts)) != len(hosts):
        raise ValueError(f"hosts {hosts}: need two or more distinct hosts of {sorted(names)}")
    spine, leaf = cut_ends(params)
    ends = {frozenset((str(link.a.node), str(link.b.node))) for link in topology.links}
    if frozenset((spine, leaf)) not in ends:
        raise ValueError(f"cut {params.cut}: no link joins {spine} and {leaf} in {topology.name}")


def allowed_busbw(topology: Topology, hosts: list[str], params: Params) -> float:
    """Bus bandwidth (payload bytes/s) the bottleneck links allow a ring over ``hosts``: a
    flow leaving a leaf shares that leaf's uplinks (one per spine) with the other flows
    leaving it, and entering one, the downlinks; each link carries ``fabric_rate_pps`` full
    packets of ``payload_bytes``."""
    spines = sum(1 for switch in topology.switches if switch.role is not Role.LEAF)
    leaf = {host: topology.host(host).nics[0].switch for host in hosts}
    ring = len(hosts)
    out: dict[str, int] = {}
    into: dict[str, int] = {}
    for rank, host in enumerate(hosts):
        right = hosts[(rank + 1) % ring]
        if leaf[host] != leaf[right]:
            out[leaf[host]] = out.get(leaf[host], 0) + 1
            into[leaf[right]] = into.get(leaf[right], 0) + 1
    crowd = max([*out.values(), *into.values(), 1])
    return params.fabric_rate_pps * params.payload_bytes * min(1.0, spines / crowd)
