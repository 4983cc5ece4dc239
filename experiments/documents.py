"""The JSON documents other processes hand an experiment, as they come: read field by field
where they are used (``counters`` reads the status, ``metrics`` the perf result, ``timeline``
the samples), never passed on as a result (``records`` holds what is kept of them)."""

from __future__ import annotations

from typing import Any, TypeAlias

#: The controller's status snapshot (``mrc-controller status --json``): each switch's
#: counters and next-hop groups, the links it sees down, the path mode.
Status: TypeAlias = dict[str, Any]
#: The agent's result of one transfer (``mrc-perf --json``): goodput, the connection's and
#: the receiver's counters, the samples.
PerfResult: TypeAlias = dict[str, Any]
#: One progress sample of a transfer (``agent.io.perf_transfer.PerfSample.to_json``):
#: ``elapsed_s``, ``bytes``, ``seconds``, ``goodput_bps``, ``total_bytes``, ...
PerfSample: TypeAlias = dict[str, Any]
