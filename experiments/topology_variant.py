"""The topology an experiment runs on: the user's choice (a preset or a file) with the
settings the experiment needs written into a copy in the results directory.

The copy is what the controller programs (queue rates reach BMv2 through it) and what the
summary records, so a result always names the exact network it was measured on. Service
ports and names stay as the user's file has them.

A variant without ECN and trimming (``ecn_and_trimming=False``) turns trimming off
(``settings.trimming: false``) and sets ECN thresholds deeper than any queue can get (never
marks). A full queue then drops at its tail, as a switch without either feature does; the
agents mark their packets exactly as in the variant with them.

The user's file is read within the bounds of :mod:`topologies.bounded_yaml` (size, nesting,
aliases expanded), as the topology loader reads it; past one is a ValueError naming the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from topologies import bounded_yaml, load_topology
from topologies.presets import PRESETS


@dataclass(frozen=True)
class HostQueue:
    """The egress queue toward one host (its switch's port): e.g. an incast receiver's last
    hop, made the incast's bottleneck."""

    host: str
    rate_pps: int
    depth: int


@dataclass(frozen=True)
class Variant:
    """Changes to a topology's settings; None leaves a setting as the file has it."""

    #: Egress queue rate (packets/s) of every switch-to-switch link; host links keep theirs.
    fabric_rate_pps: int | None = None
    #: Egress queue depth (packets) of every switch-to-switch link: at a few hundred
    #: packets/s the default 64 would mean a queueing delay of a fraction of a second.
    fabric_queue_depth: int | None = None
    #: Queue depth at which trimmable packets are trimmed (must stay below every depth).
    trim_threshold: int | None = None
    #: RED-like ECN marking between these queue depths.
    ecn_thresholds: tuple[int, int] | None = None
    #: LLDP probe interval: every probe costs BMv2 forwarding time that traffic then lacks.
    lldp_interval_ms: int | None = None
    #: Queues toward particular hosts (their NICs' links).
    host_queues: tuple[HostQueue, ...] = ()
    #: False: no ECN marking and no trimming anywhere (see the module's docstring).
    ecn_and_trimming: bool = True
    #: The controller's routing policy (``static``, ``reactive``, ``converge:S``; None: its
    #: default). Not a topology setting: the controller is started with it, and modes under
    #: different policies get a bring-up each.
    routing: str | None = None


def source_document(topology_ref: str) -> dict[str, Any]:
    """The YAML document of a preset name or a file path."""
    path = PRESETS[topology_ref].path if topology_ref in PRESETS else Path(topology_ref)
    try:
        document = bounded_yaml.load(bounded_yaml.read_text(path))
    except (bounded_yaml.YamlRejected, yaml.YAMLError) as error:
        raise ValueError(f"{topology_ref}: not a topology document: {error}") from None
    if not isinstance(document, dict):
        raise ValueError(f"{topology_ref}: not a topology document")
    return document


def write_variant(
    topology_ref: str, variant: Variant, directory: Path, name: str = "topology.yaml"
) -> Path:
    """Write the changed topology to ``directory/name`` (validated by loading it)."""
    document = source_document(topology_ref)
    settings = document.setdefault("settings", {})
    if variant.lldp_interval_ms is not None:
        settings.setdefault("lldp", {})["interval_ms"] = variant.lldp_interval_ms
    if variant.trim_threshold is not None:
        settings["trim_threshold"] = variant.trim_threshold
    if variant.ecn_thresholds is not None:
        low, high = variant.ecn_thresholds
        settings["ecn"] = {"min_threshold": low, "max_threshold": high}
    for link in document.get("links", []):
        if variant.fabric_rate_pps is not None:
            link["queue_rate_pps"] = variant.fabric_rate_pps
        if variant.fabric_queue_depth is not None:
            link["queue_depth"] = variant.fabric_queue_depth
    _apply_host_queues(document, variant.host_queues)
    path = directory / name
    _write(path, document)
    if not variant.ecn_and_trimming:
        deepest = max(link.params.queue_depth for link in load_topology(str(path)).all_links)
        settings["ecn"] = {"min_threshold": deepest + 1, "max_threshold": deepest + 1}
        settings["trimming"] = False
        _write(path, document)
    load_topology(str(path))  # a variant the validator refuses fails here, before bring-up
    return path


def _apply_host_queues(document: dict[str, Any], queues: tuple[HostQueue, ...]) -> None:
    hosts = {host["name"]: host for host in document.get("hosts", [])}
    for queue in queues:
        if queue.host not in hosts:
            raise ValueError(f"no host {queue.host!r} in the topology (hosts: {', '.join(hosts)})")
        for nic in hosts[queue.host]["nics"]:
            nic["queue_rate_pps"] = queue.rate_pps
            nic["queue_depth"] = queue.depth


def _write(path: Path, document: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
