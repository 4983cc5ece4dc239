"""Experiments that show what MRC buys, each run end to end on the testbed.

``python -m experiments NAME`` (``make experiment NAME=...``) brings the topology up, runs
every seed in both modes (``mrc``: 256 EVs; ``single``: ``--evs 1``, the RoCE-like
baseline), tears it down, and writes ``results/<name>-<timestamp>/``. One module per
experiment (``failover``, ``spray``, ``incast``); the shared parts: ``experiment`` (the runner:
counter-balanced order, bring-ups, what limited each run), ``results`` (the directory,
versions, summary checks), ``metrics`` (a transfer's figures from the agent's result),
``counters`` (switch counters from the controller's status), ``cpu`` and ``bottleneck`` (each
core's load, each link's utilisation, the verdict), ``capabilities`` (what the target can do,
so that no comparison it cannot make is made), ``stats`` (every mean with its spread),
``topology_variant`` (link rates and other settings an experiment needs), ``plots``.
"""
