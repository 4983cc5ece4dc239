"""``reboot``: a spine loses power under four long flows, both ways between the leaves, and
comes back (the papers' T1 reboot): ``failover`` with the ``switch`` placement and its own
flows, measured, summarized and drawn as failover is: the spine drawn with the seed (or the
busiest, ``cut_choice=busiest``), under ``static`` and ``converge:3`` routing. Per contender
whether it died, its stall, its recovery and its bytes lost, its runs the power loss hit
apart from those it missed, and the strongest RoCE on each measure."""

from __future__ import annotations

from dataclasses import dataclass

from experiments import failover
from experiments.experiment import Experiment
from experiments.failover.figures import FailoverFigures, draw, headline, summarize, text
from experiments.failover.modes import FailoverMode, Params, modes_of
from experiments.failover.run import FailoverRun, FailoverSeries, run_mode
from experiments.placements import Placement


@dataclass(frozen=True)
class RebootParams(Params):
    """Failover's knobs, with four flows both ways and the whole spine as the placement."""

    flows: str = "h1:h3,h2:h4,h3:h1,h4:h2"
    placements: str = Placement.SWITCH.value


EXPERIMENT: Experiment[RebootParams, FailoverMode, FailoverRun, FailoverSeries, FailoverFigures] = (
    Experiment(
        name="reboot",
        default_topology=failover.DEFAULT_TOPOLOGY,
        params_type=RebootParams,
        modes_of=modes_of,
        variant=failover.variant,
        run_mode=run_mode,
        summarize=summarize,
        draw=draw,
        text=text,
        check_topology=failover.check_topology,
        may_fail=failover.may_fail,
        headline=headline,
        planned_s=failover.planned_s,
    )
)
