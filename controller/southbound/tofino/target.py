"""The ``tofino`` target: Tofino switches running the TNA program, over P4Runtime (Stratum or
the SDE), links found by LLDP probes. Its switches are hardware: the controller drives them,
the testbed cannot start them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import finsy as fy

from controller.intent import compute_intent
from controller.southbound.device_ports import DevicePorts
from controller.southbound.grpc_settings import GrpcSettings, check_grpc, credentials, endpoints
from controller.southbound.target import (
    Capabilities,
    ControllerTarget,
    EcnMarking,
    TargetSettingsError,
)
from controller.southbound.tofino.device_config import (
    DeviceConfigError,
    DeviceConfigFormat,
    pack_device_config,
    read_program,
)
from controller.southbound.tofino.southbound import TofinoOptions, TofinoSouthbound
from controller.southbound.tofino.tna_program import (
    DEFAULT_CELLS_PER_PACKET,
    TNA_P4INFO_PATH,
    missing_tables,
)
from topologies.model import Topology
from topologies.paths import PathMode


@dataclass(frozen=True)
class TofinoConfig:
    """The configuration's ``tofino`` section: the compiled TNA program and how its server
    takes it."""

    #: p4c-barefoot's output directory or ``.conf`` file; None: not given (the tofino target
    #: then refuses to start).
    program: Path | None = None
    device_config: DeviceConfigFormat = DeviceConfigFormat.STRATUM
    p4info: Path = TNA_P4INFO_PATH
    cells_per_packet: int = DEFAULT_CELLS_PER_PACKET


class TofinoSettings(GrpcSettings, Protocol):
    """What the tofino target reads of the controller's configuration."""

    @property
    def tofino(self) -> TofinoConfig: ...

    @property
    def path_mode(self) -> PathMode: ...


def check_tofino(topology: Topology, settings: TofinoSettings) -> None:
    """The compiled TNA program must be readable and packable before any switch is touched."""
    tofino = settings.tofino
    if tofino.program is None:
        raise TargetSettingsError(
            "the tofino target needs tofino.program in the config file: p4c-barefoot's "
            "output directory for the TNA program, built for the switch's SDE (docs/tofino.md)"
        )
    if not tofino.p4info.is_file():
        raise TargetSettingsError(f"TNA P4Info {tofino.p4info} not found (docs/tofino.md)")
    try:
        pack_device_config(read_program(tofino.program), tofino.device_config)
    except DeviceConfigError as error:
        raise TargetSettingsError(f"tofino: {error}") from None
    try:
        tables = [table.name for table in fy.P4Schema(tofino.p4info).tables]
    except Exception as error:  # finsy raises the protobuf parser's own errors
        raise TargetSettingsError(f"TNA P4Info {tofino.p4info}: cannot parse: {error}") from None
    intent = compute_intent(topology, path_mode=settings.path_mode)
    missing = missing_tables(intent.switches, tables)
    if missing:
        raise TargetSettingsError(
            f"{topology.source}: needs tables the TNA program lacks: {', '.join(missing)}"
        )
    check_grpc(topology, settings)


def build_tofino(topology: Topology, settings: TofinoSettings) -> TofinoSouthbound:
    """The Tofino southbound for every switch of ``topology``, renumbering by its port map."""
    tofino = settings.tofino
    if tofino.program is None:
        raise TargetSettingsError("the tofino target needs tofino.program in the config file")
    options = TofinoOptions(
        program=tofino.program,
        device_config=tofino.device_config,
        p4info=tofino.p4info,
        election_id=settings.election_id,
        credentials=credentials(settings.tls),
        max_batch=settings.max_batch,
        cells_per_packet=tofino.cells_per_packet,
    )
    device_ports = {switch.name: DevicePorts.of(switch) for switch in topology.switches}
    return TofinoSouthbound(endpoints(topology, settings), options, device_ports)


TOFINO = ControllerTarget[TofinoSettings](
    name="tofino",
    summary="Tofino switches running the TNA program, over P4Runtime (Stratum or the SDE)",
    # Every path mode whose tables the compiled program has: check_tofino reads its P4Info.
    capabilities=Capabilities(
        ecn=EcnMarking(program="mrc.p4 (TNA)"),
        hardware=(
            "there is no Tofino switch to start here: the testbed brings up software switches "
            "only; run `mrc-controller run TOPOLOGY --target tofino --config FILE` against your "
            "switches (docs/tofino.md)"
        ),
        lossless_class=(
            "lossless class (queue QID_LOSSLESS) as far as the switch's port configuration "
            "runs PFC for it: bf-drivers, not P4 (docs/tofino.md)"
        ),
    ),
    check=check_tofino,
    build=build_tofino,
)
