"""Experiments that show what MRC buys, each run end to end on the testbed.

``python -m experiments NAME`` (``make experiment NAME=...``) brings the topology up, runs
every seed in every mode, tears it down, and writes ``results/<name>-<timestamp>/``. One
module or package per experiment (``failover``, ``reboot``, ``loss``, ``spray``, ``incast``,
``collectives``; a package's parts are its modes, one run, and its figures; ``registry``
names them), each over typed values: its parameters, its modes
(a mode's label is its ``str()``), its record of a run and its figures, frozen dataclasses
written into summary.json by ``json_form``.

The shared parts: ``experiment`` (what an experiment provides), ``runner`` (an experiment end
to end), ``plan`` (the counter-balanced order, the bring-ups), ``invariants`` (what every run
must hold), ``summary`` and ``results`` (summary.json, the directory, versions, the checks),
``records`` (a run and its transfers), ``metrics`` (a transfer's figures from the agent's
result), ``schedule`` (a run's timeline of cuts, restores and jobs), ``timeline`` (several
transfers on one clock), ``counters`` (switch counters from the controller's status),
``placements`` (where failover breaks the fabric), ``fabric_loss`` (what the loss rules did),
``cpu``, ``cpu_load`` and ``bottleneck`` (each core's load, each link's utilisation, the
verdict), ``capabilities`` (what the target can do, so that no comparison it cannot make is
made), ``stats`` (every mean with its spread), ``topology_variant`` (link rates and other
settings an experiment needs), ``transports`` (transports and routing policies), ``paths``,
``plots``.
"""
