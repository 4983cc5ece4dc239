"""Experiments that show what MRC buys, each run end to end on the testbed.

``python -m experiments NAME`` (``make experiment NAME=...``) brings the topology up, runs
every seed in both modes (``mrc``: 256 EVs; ``single``: ``--evs 1``, the RoCE-like
baseline), tears it down, and writes ``results/<name>-<timestamp>/``. One module per
experiment (``failover``, ``spray``); the shared parts: ``results`` (the directory, versions,
summary checks), ``metrics`` (a transfer's figures from the agent's result), ``counters``
(switch counters from the controller's status), ``topology_variant`` (link rates and other
settings an experiment needs), ``plots``.
"""
