"""The function a seed's task names, in a module that imports nothing at its top.

The scheduler unpickles each task it is given, the function by its module and name, the
arguments too: were it :func:`experiments.cluster.task.run_seed` itself, with a
:class:`~experiments.cluster.job.SeedJob`, the scheduler would import every experiment and the
testbed on the first task (4 s of its event loop stalled here) and would have to run this
project's code. It gets this module and bytes instead; the worker, which has imported the
task's modules before joining, unpickles the job.
"""

from __future__ import annotations


def run_seed(pickled_job: bytes) -> object:
    """:func:`experiments.cluster.task.run_seed`, imported on the worker."""
    from experiments.cluster.task import run_seed as run

    return run(pickled_job)
