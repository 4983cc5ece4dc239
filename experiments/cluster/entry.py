"""The function a seed's task names, in a module that imports nothing at its top.

The scheduler unpickles each task it is given, the function by its module and name, the
arguments too: were it :func:`experiments.cluster.task.run_seed` itself, with a
:class:`~experiments.cluster.job.SeedJob`, the scheduler would import every experiment and the
testbed on the first task, stalling its event loop for seconds, and would have to run this
project's code. It gets this module, plain values and bytes instead; the worker, which has
imported the task's modules before joining, checks the client's tree (a plain string) before
it unpickles the job, so that a worker whose code differs refuses the seed rather than failing
to unpickle it.
"""

from __future__ import annotations


def run_seed(client_tree: str, sweep: str, seed: int, pickled_job: bytes) -> object:
    """:func:`experiments.cluster.task.run_seed`, imported on the worker."""
    from experiments.cluster.task import run_seed as run

    return run(client_tree, sweep, seed, pickled_job)
