"""Fabric routing policies: which switches learn of a link change, and when.

A link change has two kinds of consequence. *Local*: a switch at an end of the link loses a
next hop; any router prunes it at once (a static or learned route whose interface went down),
and the data plane does it even before the controller (``watch_port`` on BMv2,
``ignore_routes_with_linkdown`` in the kernel). *Fabric-wide*: switches elsewhere stop sending
toward a spine that can no longer reach the destination; that takes a routing protocol, or a
controller. The policies differ only in the second:

* ``static``, MRC's deployment: routes and groups are computed once from the full topology and
  never recomputed. Each switch prunes its own dead next hops and nothing else, so a spine whose
  last link toward a leaf is dead drops what the other leaves still send it for that leaf; MRC's
  endpoints steer around such paths themselves.
* ``reactive`` (the default): the controller recomputes the whole fabric on every change and
  programs it within milliseconds.
* ``converge:SECONDS`` (default 3): like ``reactive``, but the fabric-wide computation sees the
  link state as it was SECONDS ago, as a routing protocol's hold timer and propagation would;
  local pruning still happens at once.

All three come down to one function of two link sets, :func:`routed_intent`: the down links the
fabric-wide computation knows of (none for ``static``, all for ``reactive``, those of SECONDS ago
for ``converge``), and the down links each switch sees at its own ports (always all).

A group whose every member is dead after pruning is removed, together with the routes that
select it: the packets then miss the route table and are dropped and counted (``no route``),
which is what a router does with a static route whose every interface is down. Only the intent
can make that choice cleanly; see ``controller.southbound.mapping`` for how BMv2 is kept alive
in the moment before the controller hears of the cut.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, replace
from enum import StrEnum

from controller.intent.compute import compute_intent
from controller.intent.model import FabricIntent, SwitchIntent
from topologies.model import LinkId, Topology
from topologies.paths import PathMode

#: ``converge`` without a delay: a few seconds, like a routing protocol's hold timer.
DEFAULT_CONVERGE_S = 3.0


class RoutingMode(StrEnum):
    """How the fabric reacts to a link change beyond its two ends (module docs)."""

    STATIC = "static"
    REACTIVE = "reactive"
    CONVERGE = "converge"


@dataclass(frozen=True)
class RoutingPolicy:
    """A routing mode and, for ``converge``, its delay in seconds."""

    mode: RoutingMode = RoutingMode.REACTIVE
    delay_s: float = 0.0

    def __post_init__(self) -> None:
        if self.mode is RoutingMode.CONVERGE:
            if not (math.isfinite(self.delay_s) and self.delay_s >= 0):
                raise ValueError(f"converge needs a delay of 0 seconds or more, not {self.delay_s}")
        elif self.delay_s != 0:
            raise ValueError(f"{self.mode} routing takes no delay (only converge:SECONDS does)")

    @classmethod
    def parse(cls, text: str) -> RoutingPolicy:
        """``static``, ``reactive``, ``converge`` or ``converge:SECONDS``; ValueError naming the
        valid forms for anything else."""
        name, sep, argument = text.strip().partition(":")
        valid = "static, reactive, converge or converge:SECONDS"
        try:
            mode = RoutingMode(name)
        except ValueError:
            raise ValueError(f"routing must be {valid}, not {text!r}") from None
        if mode is not RoutingMode.CONVERGE:
            if sep:
                raise ValueError(f"routing {name} takes no argument (only converge:SECONDS does)")
            return cls(mode)
        if not sep:
            return cls(mode, DEFAULT_CONVERGE_S)
        try:
            delay = float(argument)
        except ValueError:
            raise ValueError(f"converge:SECONDS takes seconds, not {argument!r}") from None
        return cls(mode, delay)

    def __str__(self) -> str:
        if self.mode is RoutingMode.CONVERGE:
            return f"converge:{self.delay_s:g}"
        return str(self.mode)

    def to_json(self) -> dict[str, object]:
        """The policy for status and results: its name, mode and delay."""
        return {"policy": str(self), "mode": str(self.mode), "delay_s": self.delay_s}


def routed_intent(
    topology: Topology,
    routed_down: Collection[LinkId] = frozenset(),
    down: Collection[LinkId] = frozenset(),
    path_mode: PathMode = PathMode.ECMP,
) -> FabricIntent:
    """What every switch holds when the fabric-wide computation knows of ``routed_down`` and
    each switch sees the links in ``down`` dead at its own ports (module docs). The path
    mode's static tables are neither recomputed nor pruned: a dead path stays dead until the
    endpoints stop using it."""
    return prune_dead_next_hops(compute_intent(topology, routed_down, path_mode), topology, down)


def prune_dead_next_hops(
    intent: FabricIntent, topology: Topology, down: Collection[LinkId]
) -> FabricIntent:
    """``intent`` with every switch's members on a dead port of its own removed from its
    groups, and a group left with no member removed together with the routes that select it.
    Switches without a dead port keep their intent unchanged (the same object)."""
    dead = frozenset(down)
    if not dead:
        return intent
    pruned = []
    for switch_intent in intent.switches:
        dead_ports = {
            port
            for port in topology.switch_ports(switch_intent.switch)
            if (link := topology.link_at(switch_intent.switch, port)) is not None
            and link.id in dead
        }
        pruned.append(_prune_switch(switch_intent, dead_ports) if dead_ports else switch_intent)
    return FabricIntent(tuple(pruned))


def _prune_switch(intent: SwitchIntent, dead_ports: set[int]) -> SwitchIntent:
    groups = []
    gone: set[int] = set()
    changed = False
    for group in intent.groups:
        live = tuple(member for member in group.members if member.egress_port not in dead_ports)
        if len(live) == len(group.members):
            groups.append(group)
        elif live:
            groups.append(replace(group, members=live))
            changed = True
        else:
            gone.add(group.group_id)
            changed = True
    if not changed:
        return intent
    return replace(
        intent,
        groups=tuple(groups),
        routes_v4=tuple(route for route in intent.routes_v4 if route.next_id not in gone),
        routes_v6=tuple(route for route in intent.routes_v6 if route.next_id not in gone),
    )
