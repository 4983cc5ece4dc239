"""The ``linux`` target: switches that forward in the Linux kernel, one network namespace each,
programmed over netlink, with link state from carrier. It needs no pipeline and no gRPC, and
does less than BMv2's ``mrc.p4``: its capabilities say what."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from controller.southbound.interface import LinkEvidence, Southbound
from controller.southbound.linux.ecn import ECN_QDISC_PREFERENCE
from controller.southbound.linux.path_modes import linux_path_mode_refusal
from controller.southbound.target import (
    Capabilities,
    ControllerTarget,
    EcnMarking,
    Feature,
    TargetSettingsError,
)
from topologies.model import Topology
from topologies.paths import PathMode


class LinuxSettings(Protocol):
    """What the linux target reads of the controller's configuration (``switch_hosts`` and
    ``tls`` only to refuse them: gRPC settings mean nothing to kernel switches)."""

    @property
    def netns_prefix(self) -> str: ...

    @property
    def queues(self) -> bool: ...

    @property
    def primary_lock(self) -> Path | None: ...

    @property
    def path_mode(self) -> PathMode: ...

    @property
    def switch_hosts(self) -> Mapping[str, str]: ...

    @property
    def tls(self) -> object | None: ...


def check_linux(topology: Topology, settings: LinuxSettings) -> None:
    """Kernel switches need no pipeline; settings that only reach gRPC servers are mistakes."""
    meaningless = [
        name
        for name, given in (("switch_hosts", bool(settings.switch_hosts)), ("tls", settings.tls))
        if given
    ]
    if meaningless:
        raise TargetSettingsError(
            f"{', '.join(meaningless)}: no meaning on the linux target (switches are network "
            "namespaces on this machine, reached over netlink)"
        )
    refusal = linux_path_mode_refusal(settings.path_mode)
    if refusal is not None:
        raise TargetSettingsError(f"{refusal} (docs/routing.md)")


def build_linux(topology: Topology, settings: LinuxSettings) -> Southbound:
    """The netlink southbound for every switch of ``topology``."""
    # Imported here: pyroute2 comes with it, and the registry must load without pyroute2 so
    # that `make doctor` can say it is missing.
    from controller.southbound.linux.southbound import LinuxOptions, LinuxSouthbound

    return LinuxSouthbound(
        [switch.name for switch in topology.switches],
        LinuxOptions(
            netns_prefix=settings.netns_prefix,
            shapers=settings.queues,
            primary_lock=settings.primary_lock,
        ),
    )


def netlink_problems() -> list[str]:
    """pyroute2, through which the controller speaks netlink, where missing."""
    if importlib.util.find_spec("pyroute2") is None:
        return ["pyroute2 not found (the controller's netlink southbound): `make setup`"]
    return []


LINUX = ControllerTarget[LinuxSettings](
    name="linux",
    summary="kernel switches, one network namespace each, programmed over netlink",
    capabilities=Capabilities(
        lacks={
            Feature.TRIMMING: "MRC recovers lost packets by SACK and timeout",
            Feature.DSCP_CLASSES: "MRC control, trimmed headers and RoCE ACK/NAKs and CNPs "
            "queue with data (the kernel forwards RoCE and MRC alike, by address)",
            Feature.LOSSLESS_ROCE: "RoCE data shares each port's one queue, and a full queue "
            "drops it at the tail",
            Feature.MEMBER_COUNTERS: "per-interface rx/tx/drop counters instead",
            Feature.RESTART: "a kernel switch has no process to kill",
        },
        # Under a port's tbf (controller/southbound/linux/ecn.py): a port without a rate limit
        # builds no queue to mark.
        ecn=EcnMarking(qdiscs=ECN_QDISC_PREFERENCE),
        link_evidence=LinkEvidence.CARRIER,
        link_source="netlink carrier events",
        arbitration=False,
        path_mode_refusal=linux_path_mode_refusal,
    ),
    check=check_linux,
    build=build_linux,
    machine_problems=netlink_problems,
)
