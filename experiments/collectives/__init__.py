"""``collective``: a training job's collective through failures, a second job and loss.

A job of one rank per host (``hosts``; default every host of ``leaf-spine-4x4``, 16 ranks)
runs ``iterations`` of a collective (``collective``, default ring all-reduce) of ``size``
bytes, each rank on its host's agent through the host API (``collective.job``). The ring is
ordered across leaves (h1, h5, h9, h13, h2, ...) so that every step of every rank crosses
the spines, and the fabric's links are slowed to ``fabric_rate_pps`` so that links, not the
two CPUs, are the bottleneck (each run records the CPU load and link utilisation).

Modes are every contender (``transports``, :mod:`experiments.transports`: by default MRC,
MRC on one EV, and RoCE under NCCL's settings, ``roce:nccl``, and on a NIC with selective
repeat and an adaptive timer, ``roce:adaptive``, each over NCCL's two QPs to a peer) in every
scenario (``scenarios``), labelled ``TRANSPORT-SCENARIO``:

* ``clean``: the job alone;
* ``cut-static``: once ``event_after`` iterations are done and half an iteration more has
  passed, a spine's downlink into a leaf (``cut``, ``s1:l2``) is cut, under ``static``
  routing: the other leaves keep hashing onto that spine, which drops what it cannot
  deliver; restored after the job;
* ``cut-converge``: the same cut under ``converge:converge_s`` (the fabric reroutes after
  that long, as a routing protocol's reconvergence would);
* ``second-job``: at the same moment a second job (``second_iterations`` iterations of the
  same collective) starts on the same hosts, ring ordered across the leaves another way
  (h1, h9, h5, h13, ...), so the two share the spines;
* ``loss``: every fabric link drops ``loss_percent`` of UDP 4791 frames for the whole job
  (``testbed.mininet.link_loss``, never LLDP).

Per run the job's report (``collective.report``: per-iteration time, algbw and busbw, job
completion time, network-wait share, a failure's time and reason) and what the bottleneck
links allow: per ring flow, the fabric link rate in payload bytes (``payload_bytes`` a full
frame carries) times the fabric links a flow has to itself (spines over the flows leaving
a leaf), so headers, SACKs and probes are the transport's cost. MRC and MRC on one EV must
complete with verified results; a job that fails is an error of the experiment. A RoCE job
(RC QPs, one path each) that fails, as under the static cut once a QP's path is dead, is a
result (``may_fail``), recorded with when and why; the launcher's watchdog
(``stall_timeout_s``) outwaits an nccl QP's own retries, so that it dies of them. Per scenario
the summary names the RoCE contender with the most bus bandwidth (a failed job's counted as
0) and MRC's ratio to it (:mod:`experiments.strongest`), besides MRC over one EV.
"""

from __future__ import annotations

from experiments.collectives.figures import (
    CollectiveFigures,
    draw,
    headline,
    summarize_runs,
    text,
)
from experiments.collectives.modes import CollectiveMode, Params, modes_of, variant
from experiments.collectives.rings import check_topology
from experiments.collectives.run import CollectiveRun, CollectiveSeries, run_mode
from experiments.experiment import Experiment
from experiments.transports import may_fail as transport_may_fail

NAME = "collective"
DEFAULT_TOPOLOGY = "leaf-spine-4x4"


def may_fail(mode: CollectiveMode) -> bool:
    """A RoCE job whose QPs run out of retries fails: a result (see experiments.transports)."""
    return transport_may_fail(mode.transport)


EXPERIMENT: Experiment[
    Params, CollectiveMode, CollectiveRun, CollectiveSeries, CollectiveFigures
] = Experiment(
    name=NAME,
    default_topology=DEFAULT_TOPOLOGY,
    params_type=Params,
    modes_of=modes_of,
    variant=variant,
    run_mode=run_mode,
    summarize=summarize_runs,
    draw=draw,
    text=text,
    check_topology=check_topology,
    may_fail=may_fail,
    headline=headline,
)
