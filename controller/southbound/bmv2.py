"""The ``bmv2`` target: BMv2's ``simple_switch_grpc`` running ``mrc.p4``, programmed over
P4Runtime (:mod:`controller.southbound.p4runtime`), queues set over Thrift
(:mod:`controller.southbound.queues`), links found by LLDP probes. It does everything the other
targets are measured against."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from controller.southbound import p4_program
from controller.southbound.grpc_settings import GrpcSettings, check_grpc, credentials, endpoints
from controller.southbound.p4runtime import P4RuntimeOptions, P4RuntimeSouthbound
from controller.southbound.queues import ThriftEndpoint, ThriftQueueBackend
from controller.southbound.target import Capabilities, ControllerTarget, TargetSettingsError
from topologies.model import Topology


class Bmv2Settings(GrpcSettings, Protocol):
    """What the bmv2 target reads of the controller's configuration."""

    @property
    def p4info(self) -> Path: ...

    @property
    def p4blob(self) -> Path: ...

    @property
    def queues(self) -> bool: ...


def check_bmv2(topology: Topology, settings: Bmv2Settings) -> None:
    """The topology and configuration must work with mrc.p4 over P4Runtime."""
    if topology.settings.cpu_port != p4_program.COMPILED_CPU_PORT:
        raise TargetSettingsError(
            f"{topology.source}: cpu_port {topology.settings.cpu_port} differs from the port "
            f"compiled into mrc.p4 ({p4_program.COMPILED_CPU_PORT})"
        )
    for path in (settings.p4info, settings.p4blob):
        if not path.is_file():
            raise TargetSettingsError(f"pipeline file {path} not found (run `make build`)")
    check_grpc(topology, settings)


def build_bmv2(topology: Topology, settings: Bmv2Settings) -> P4RuntimeSouthbound:
    """The P4Runtime southbound for every switch of ``topology``, with Thrift queues."""
    queues = (
        ThriftQueueBackend(
            {
                switch.name: ThriftEndpoint(settings.host_of(switch.name), switch.thrift_port)
                for switch in topology.switches
            }
        )
        if settings.queues
        else None
    )
    options = P4RuntimeOptions(
        p4info=settings.p4info,
        p4blob=settings.p4blob,
        election_id=settings.election_id,
        credentials=credentials(settings.tls),
        max_batch=settings.max_batch,
    )
    return P4RuntimeSouthbound(endpoints(topology, settings), options, queues)


def compiled_program_problems() -> list[str]:
    """The compiled mrc.p4 the controller pushes, where missing."""
    return [
        f"{path} missing: run `make build` (needs p4c)"
        for path in (p4_program.P4INFO_PATH, p4_program.P4BLOB_PATH)
        if not path.is_file()
    ]


BMV2 = ControllerTarget[Bmv2Settings](
    name="bmv2",
    summary="P4Runtime switches: BMv2's simple_switch_grpc running mrc.p4, queues over Thrift",
    capabilities=Capabilities(),
    check=check_bmv2,
    build=build_bmv2,
    machine_problems=compiled_program_problems,
)
