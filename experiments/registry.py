"""The experiments ``make experiment NAME=...`` knows, by name."""

from __future__ import annotations

from experiments import collectives, failover, incast, loss, spray
from experiments.experiment import Experiment

EXPERIMENTS: dict[str, Experiment] = {
    experiment.name: experiment
    for experiment in (
        failover.EXPERIMENT,
        failover.REBOOT,
        loss.EXPERIMENT,
        spray.EXPERIMENT,
        incast.EXPERIMENT,
        collectives.EXPERIMENT,
    )
}
