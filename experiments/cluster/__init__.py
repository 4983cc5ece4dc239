"""Experiment sweeps on many machines: each seed's runs one Dask task (``--cluster``).

``python -m experiments NAME --cluster tcp://HOST:PORT`` (``make experiment CLUSTER=...``)
submits each seed, with its modes in the order a local run gives them, as one task needing
one ``fabric`` resource, so that a machine runs one emulation at a time; the results come
back and are merged as a local multi-seed run merges them, figures drawn at the client.
``python -m experiments.cluster scheduler|worker`` (``make cluster-scheduler``,
``make cluster-worker``) start the machines' side.

The modules, one job each: :mod:`~experiments.cluster.tree` (which commit a tree is at),
:mod:`~experiments.cluster.job` (what a task gets and gives back),
:mod:`~experiments.cluster.task` (a seed's runs on a worker; the scheduler sees
:mod:`~experiments.cluster.entry`, which imports it on the worker alone),
:mod:`~experiments.cluster.attempts` (which worker ran which seed, the reruns),
:mod:`~experiments.cluster.progress` (the client's lines),
:mod:`~experiments.cluster.merge` (the seeds' results as one run's),
:mod:`~experiments.cluster.fanout` (the client), :mod:`~experiments.cluster.plugin` (the
worker's cleanup before it takes work) and :mod:`~experiments.cluster.__main__` (the CLI).

Only ``fanout``, ``task``, ``plugin`` and the CLI import Dask, and only ``--cluster`` imports
them: a local run never loads it.
"""
