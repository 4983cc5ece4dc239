"""``incast``: three senders into one receiver while a victim flow crosses the same spine
links, in a fabric with ECN marking and trimming and in one without.

The victim (``victim_source`` -> ``victim_destination``) runs for ``victim_duration_s``; at
``incast_at_s`` on its clock the ``senders`` each send ``incast_bytes`` to ``receiver`` at
once. By default the victim's destination shares the receiver's leaf, so every spine-to-leaf
hop into that leaf may carry both; whatever the hosts, the links they share are computed from
the topology (``shared_hops``) and a victim that shares none is refused before anything is
brought up. Switch-to-switch queues are slowed to ``fabric_rate_pps`` and the receiver's last
hop to ``receiver_rate_pps`` so that the switches' queues, not the two CPUs, are the
bottleneck: the incast's at the receiver's port, the victim's on the shared spine links.

Both modes run MRC with ``evs`` EVs; what differs is the fabric (one bring-up each, see
``topology_variant``): ``ecn_trim_on`` marks ECN on fabric ports and trims at
``trim_threshold``; ``ecn_trim_off`` does neither, so full queues drop at the tail and the
senders learn of congestion only from SACK gaps and timeouts. A sender that overruns the
receiver's port wastes the shared spine links on packets that are then lost there; that is
what a victim suffers from in a fabric without those signals.

Figures: the victim's goodput over time, the incast's span shaded, and the incast's
completion time (from launching its transfers until the last one finished), per mode; the
summary gives, per mode, the victim's goodput before and during the incast, its shortfall
(the bytes it fell short of its level before the incast, over the incast's span: windows of
different lengths compare by it), the completion time, and the trims and ECN marks the
switches counted (to show "off" was off; None where the target cannot count them), each as
mean and spread over the seeds with each seed's pair beside them.

The on/off comparison is made only where the target has something to switch: on a target
that neither trims nor marks ECN (a kernel switch on a kernel without RED or codel) both
fabrics are the same, and the summary says "not applicable" and what the target lacked
instead of giving a ratio; both modes still run, and their difference is then the run-to-run
spread of one fabric. Where the target marks ECN but does not trim, the comparison is ECN's
alone, and says so.

The parts: :mod:`~experiments.incast.modes` (the knobs, the two fabrics, who sends to
whom), :mod:`~experiments.incast.run` (one run) and :mod:`~experiments.incast.figures` (over
both fabrics and every seed, the on/off comparison; the figure file).
"""

from __future__ import annotations

from experiments.experiment import Experiment
from experiments.incast.figures import IncastFigures, draw, headline, summarize, text
from experiments.incast.modes import Fabric, Params, modes_of, shared_hops
from experiments.incast.run import IncastRun, IncastSeries, run_mode
from experiments.topology_variant import HostQueue, Variant
from topologies.model import Topology

NAME = "incast"
DEFAULT_TOPOLOGY = "leaf-spine-4x4"


def planned_s(params: Params, mode: Fabric) -> float:
    """A run lasts as long as its victim flow, the incast inside it."""
    del mode
    return params.victim_duration_s


def variant(params: Params, mode: Fabric) -> Variant:
    """Slowed fabric and receiver port; ECN and trimming only in ``ecn_trim_on``."""
    return Variant(
        fabric_rate_pps=params.fabric_rate_pps,
        fabric_queue_depth=params.queue_depth,
        trim_threshold=params.trim_threshold,
        ecn_thresholds=(params.ecn_min, params.ecn_max),
        lldp_interval_ms=params.lldp_interval_ms,
        host_queues=(HostQueue(params.receiver, params.receiver_rate_pps, params.queue_depth),),
        ecn_and_trimming=mode == Fabric.ECN_TRIM_ON,
    )


def check_topology(topology: Topology, params: Params) -> None:
    """ValueError unless every host named exists and the victim shares a link with the
    incast."""
    hosts = {host.name for host in topology.hosts}
    named = (params.receiver, params.victim_source, params.victim_destination)
    unknown = [name for name in (*named, *params.sender_hosts) if name not in hosts]
    if unknown:
        raise ValueError(f"{topology.name} has no host {', '.join(map(repr, unknown))}")
    shared_hops(topology, params)


EXPERIMENT: Experiment[Params, Fabric, IncastRun, IncastSeries, IncastFigures] = Experiment(
    name=NAME,
    default_topology=DEFAULT_TOPOLOGY,
    params_type=Params,
    modes_of=modes_of,
    variant=variant,
    run_mode=run_mode,
    summarize=summarize,
    draw=draw,
    text=text,
    # As in spray: LLDP probes queue behind the data on the slowed links and would read as
    # cuts. Nothing is cut here.
    discovery=False,
    check_topology=check_topology,
    headline=headline,
    planned_s=planned_s,
)
