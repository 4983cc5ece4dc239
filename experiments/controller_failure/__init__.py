"""``controller``: the controller fails too. A transfer runs with two controllers in the
run (``Testbed(backup=True)``); at ``kill_at_s`` the acting one is killed with SIGKILL and the
other takes over (P4Runtime arbitration on bmv2, the primary lock on linux), reconciling
each switch (read back, write the difference: nothing, when nothing changed); at
``cut_at_s`` a spine's downlink into the destination leaf, drawn with the seed, is cut and the
new primary must reroute it. Recorded per run: the time from the kill to the other being
primary on every switch, what it wrote taking over, the time from the cut to its last write,
bytes lost and whether the transfer completed; the modes are the transports (MRC, one EV,
RoCE). Routing is the controller's default, ``reactive``: the reroute is the new primary's.

The parts: :mod:`~experiments.controller_failure.run` (one run) and
:mod:`~experiments.controller_failure.figures` (over every transport and seed).
"""

from __future__ import annotations

from experiments.controller_failure.figures import ControllerFigures, draw, summarize, text
from experiments.controller_failure.run import (
    ControllerParams,
    ControllerRunRecord,
    ControllerSeries,
    run_controller_failure,
)
from experiments.experiment import Experiment
from experiments.topology_variant import Variant
from experiments.transports import may_fail as transport_may_fail
from experiments.transports import parse_transports
from topologies.model import Topology

NAME = "controller"


def modes_of(params: ControllerParams) -> tuple[str, ...]:
    """The transports, in the order given."""
    return parse_transports(params.transports)


def variant(params: ControllerParams, mode: str) -> Variant:
    """One network for every transport."""
    del mode
    return Variant(lldp_interval_ms=params.lldp_interval_ms)


def check_topology(topology: Topology, params: ControllerParams) -> None:
    """The flow's hosts exist."""
    hosts = {host.name for host in topology.hosts}
    for host in (params.source, params.destination):
        if host not in hosts:
            raise ValueError(f"no host {host!r} in {topology.name} (hosts: {sorted(hosts)})")


def planned_s(params: ControllerParams, mode: str) -> float:
    del mode
    return params.duration_s


EXPERIMENT: Experiment[
    ControllerParams, str, ControllerRunRecord, ControllerSeries, ControllerFigures
] = Experiment(
    name=NAME,
    default_topology="leaf-spine",
    params_type=ControllerParams,
    modes_of=modes_of,
    variant=variant,
    run_mode=run_controller_failure,
    summarize=summarize,
    draw=draw,
    text=text,
    check_topology=check_topology,
    may_fail=transport_may_fail,
    planned_s=planned_s,
    backup=True,
)
