"""``loss``: goodput against random loss on the fabric's links, per transport.

One transfer from ``source`` to ``destination`` (on different leaves) for ``duration_s``,
once per contender (``mrc``, ``single``, and RoCE in every profile of ``roce_profiles`` and
perftest's at each verbs timeout of ``perftest_timeouts``: see :mod:`experiments.transports`)
and loss rate (``rates_percent``): every fabric link drops each UDP 4791 frame crossing it, in
either direction (data and acknowledgements), with that probability; LLDP and the side
channel are never dropped (``testbed.mininet.link_loss``: nftables in the patch panel, the
same on both targets). A data packet crosses two fabric links from leaf to leaf, so its
chance of being lost on the way is about twice the rate. The modes are
``TRANSPORT@RATE%`` (``mrc@1%``), rate by rate, and share one bring-up: the loss is set
before each run and removed after it, and each run records the frames its rules saw and
dropped (the loss it got, not only the rate it asked for).

Per transport and rate: goodput as mean and spread over seeds; each transport's
*retention*, its goodput at a rate over its own lossless goodput in the same seed (a 0 rate
must be among the rates); MRC over each RoCE contender at each rate, per seed, and at each
rate the strongest RoCE contender and MRC's ratio to it. Figure ``loss.png``:
goodput and retention against the rate. A RoCE transfer that fails (its retries ran out)
is a result, with its error and when; MRC must complete and lose nothing at every rate.

The parts: :mod:`~experiments.loss.modes` (the knobs and modes, ``TRANSPORT@RATE%``),
:mod:`~experiments.loss.run` (one run) and :mod:`~experiments.loss.figures` (over every mode
and seed; the figure file).
"""

from __future__ import annotations

from experiments.experiment import Experiment
from experiments.loss.figures import LossFigures, draw, summarize, text
from experiments.loss.modes import LossMode, Params, modes_of
from experiments.loss.run import LossRun, LossSeries, run_mode
from experiments.placements import leaves_of
from experiments.topology_variant import Variant
from experiments.transports import may_fail as transport_may_fail
from experiments.transports import parse_routing
from topologies.model import Topology

NAME = "loss"
DEFAULT_TOPOLOGY = "leaf-spine"


def may_fail(mode: LossMode) -> bool:
    """A RoCE transfer whose retries run out fails: a result (see experiments.transports)."""
    return transport_may_fail(mode.transport)


def check_topology(topology: Topology, params: Params) -> None:
    """Both hosts exist and sit on different leaves (the loss is on fabric links)."""
    hosts = {host.name for host in topology.hosts}
    for host in (params.source, params.destination):
        if host not in hosts:
            raise ValueError(f"no host {host!r} in {topology.name} (hosts: {sorted(hosts)})")
    if set(leaves_of(topology, [params.source])) & set(leaves_of(topology, [params.destination])):
        raise ValueError(
            f"{params.source} and {params.destination} share a leaf: their traffic would "
            "cross no fabric link"
        )


def planned_s(params: Params, mode: LossMode) -> float:
    """Every run is one transfer of ``duration_s``."""
    del mode
    return params.duration_s


def variant(params: Params, mode: LossMode) -> Variant:
    """One network for every mode (the loss is set per run, in the patch panel)."""
    del mode
    routing = parse_routing(params.routing) if params.routing else None
    return Variant(lldp_interval_ms=params.lldp_interval_ms, routing=routing)


EXPERIMENT: Experiment[Params, LossMode, LossRun, LossSeries, LossFigures] = Experiment(
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
    planned_s=planned_s,
)
