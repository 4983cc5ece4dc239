"""``failover``: transfers across the fabric lose part of it mid-way and get it back.

The flows (``flows``, ``SOURCE:DESTINATION`` on different leaves; one by default) run for
``duration_s``. At ``cut_at_s`` part of the fabric fails (:mod:`experiments.placements`):

* ``local``: an uplink of the source leaf (the source leaf sees it go);
* ``remote``: a spine's downlink into the destination leaf (invisible to the source leaf);
* ``switch``: a spine loses power under load (bmv2: its process is killed with kill -9 and
  its links go dark; linux, with no switch process: its links go dark), and comes back at
  ``restore_at_s``: power on, reprogrammed by the controller, links lit. With several long
  flows this is the papers' T1 reboot (``make experiment NAME=reboot``);
* ``nic``: a NIC of the source host (a host with a NIC per plane, ``two-plane``).

Which one (``cut_choice``): ``random`` by default, drawn with the seed whatever the traffic,
so every contender of a seed meets the same fault and whether a one-path flow is hit is
chance, as in a real fabric; or ``busiest``, the one that carried the most between the run's
start and a probe ``PROBE_LEAD_S`` before the cut (the single-path flow's own path). The
same counters say whose traffic the cut hit (:mod:`~experiments.failover.exposure`).

At ``restore_at_s`` it comes back. The modes are every contender (``mrc``, ``single``,
``roce:perftest``, ``roce:nccl``, ``roce:adaptive``, see :mod:`experiments.transports`)
under every controller routing policy (``routings``) at every placement (``placements``):
``mrc-static-remote`` and so on. The default runs ``static`` routing (MRC's deployment:
nothing is rerouted fabric-wide, so a RoCE QP on a cut path dies) and ``converge:3`` (the
fabric reroutes within seconds, so RoCE's cost is its stall), a ``remote`` cut. Modes under
one policy share a bring-up; the order alternates seed by seed as every experiment's does.

The parts: :mod:`~experiments.failover.modes` (the knobs and modes),
:mod:`~experiments.failover.cuts` (what is broken and when),
:mod:`~experiments.failover.exposure` (whose traffic it hit), :mod:`~experiments.failover.run`
(one run) and :mod:`~experiments.failover.figures` (over every mode and seed: deaths,
recovery, stalls, losses, exposure, the strongest RoCE per measure; the figure files).
"""

from __future__ import annotations

from experiments.experiment import Experiment
from experiments.failover.figures import FailoverFigures, draw, headline, summarize, text
from experiments.failover.modes import FailoverMode, Params, modes_of
from experiments.failover.run import FailoverRun, FailoverSeries, run_mode
from experiments.placements import Placement, leaves_of
from experiments.topology_variant import Variant
from experiments.transports import may_fail as transport_may_fail
from topologies.model import Topology

NAME = "failover"
DEFAULT_TOPOLOGY = "leaf-spine"


def may_fail(mode: FailoverMode) -> bool:
    """A RoCE transfer whose retries run out fails: a result (see experiments.transports)."""
    return transport_may_fail(mode.transport)


def check_topology(topology: Topology, params: Params) -> None:
    """Every flow's hosts exist and sit on different leaves; ``nic`` needs sources with a
    NIC to spare."""
    hosts = {host.name for host in topology.hosts}
    for source, destination in params.flow_pairs():
        for host in (source, destination):
            if host not in hosts:
                raise ValueError(f"no host {host!r} in {topology.name} (hosts: {sorted(hosts)})")
        shared = set(leaves_of(topology, [source])) & set(leaves_of(topology, [destination]))
        if shared:
            raise ValueError(
                f"flow {source}:{destination}: both hosts are on {sorted(shared)}: the fabric "
                "between them has nothing to cut"
            )
    if Placement.NIC in params.placement_list():
        for source, _ in params.flow_pairs():
            if len(topology.host(source).nics) < 2:
                raise ValueError(
                    f"placement nic cuts one of {source}'s NICs, and {source} has one in "
                    f"{topology.name}: use a topology with a NIC per plane (TOPO=two-plane)"
                )


def planned_s(params: Params, mode: FailoverMode) -> float:
    """Every flow of a run lasts ``duration_s``, the cut and restore among it."""
    del mode
    return params.duration_s


def variant(params: Params, mode: FailoverMode) -> Variant:
    """One network per routing policy (the agents and the cut differ, not the network)."""
    return Variant(lldp_interval_ms=params.lldp_interval_ms, routing=str(mode.routing))


EXPERIMENT: Experiment[Params, FailoverMode, FailoverRun, FailoverSeries, FailoverFigures] = (
    Experiment(
        name=NAME,
        default_topology=DEFAULT_TOPOLOGY,
        params_type=Params,
        modes_of=modes_of,
        variant=variant,
        run_mode=run_mode,
        summarize=summarize,
        draw=draw,
        text=text,
        check_topology=check_topology,
        may_fail=may_fail,
        headline=headline,
        planned_s=planned_s,
    )
)
