"""The experiments ``make experiment NAME=...`` knows, by name."""

from __future__ import annotations

from experiments import collectives, controller_failure, failover, incast, loss, reboot, spray
from experiments.experiment import AnyExperiment

EXPERIMENTS: dict[str, AnyExperiment] = {
    experiment.name: experiment
    for experiment in (
        failover.EXPERIMENT,
        reboot.EXPERIMENT,
        loss.EXPERIMENT,
        spray.EXPERIMENT,
        incast.EXPERIMENT,
        collectives.EXPERIMENT,
        controller_failure.EXPERIMENT,
    )
}
