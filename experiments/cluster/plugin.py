"""The worker's plugin: before a worker takes work, what a run killed with its worker left on
the machine is removed (``make stop``'s sweep of namespaces, veths and processes, for the runs
recorded under this machine's runs root whose owner is dead), so that a worker that comes
back after being lost mid-run does not start its next run beside the remains of the last."""

from __future__ import annotations

import logging

from distributed import Worker, WorkerPlugin

from testbed.mininet.cleanup import sweep_dead_runs

log = logging.getLogger(__name__)


class FabricCleanup(WorkerPlugin):
    """Given to the worker at its start (``Worker(plugins=...)``), whose setup runs before
    the worker registers with the scheduler, hence before any task reaches it."""

    name = "mrc-fabric-cleanup"

    def setup(self, worker: Worker) -> None:
        for prefix, left in sweep_dead_runs().items():
            if left.empty:
                log.warning("worker %s: removed run %s, left by a killed run", worker.name, prefix)
            else:
                log.error("worker %s: run %s could not be removed: %s", worker.name, prefix, left)
