"""The ``tofino`` southbound: Tofino switches over P4Runtime, as Stratum or the SDE serve it.

It is the finsy P4Runtime southbound (arbitration, backup role, reconciliation by read-back,
TLS, phased batches, LLDP over packet I/O) with what differs on Tofino:

* the pipeline's device config is the compiled TNA program packed for the switch's server
  (:mod:`controller.southbound.tofino.device_config`), pushed only where the switch's cookie
  differs, as on BMv2;
* entities are the TNA program's (:mod:`controller.southbound.tofino.tna_program`);
* ports are renumbered by the topology's port map, at the southbound's edge;
* there is no Thrift: queue depth and rate are the switch's traffic-manager configuration,
  and the one thing the controller adds beside table entries, each trimming port's mirror
  session, goes over P4Runtime (:class:`~controller.southbound.tofino.tna_program.TrimSessions`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import finsy as fy

from controller.southbound.device_ports import DevicePorts
from controller.southbound.p4runtime import P4RuntimeOptions, P4RuntimeSouthbound, SwitchEndpoint
from controller.southbound.tofino.device_config import (
    DeviceConfigFormat,
    pack_device_config,
    read_program,
)
from controller.southbound.tofino.tna_program import (
    DEFAULT_CELLS_PER_PACKET,
    HIGH_PRIORITY_QUEUE,
    TNA_P4INFO_PATH,
    TrimSessions,
    tna_adapter,
)
from controller.southbound.writer import DEFAULT_MAX_BATCH

#: The trimmed copy's class of service, by server. PI's P4Runtime frontend, which the SDE's
#: server embeds, refuses any but 0 ("COS for clone sessions not supported yet", PI main of
#: 2026-06): there the copy leaves on queue 0 behind the data it stands for (docs/tofino.md).
TRIM_CLASS_OF_SERVICE = {
    DeviceConfigFormat.STRATUM: HIGH_PRIORITY_QUEUE,
    DeviceConfigFormat.BF_P4RT: 0,
}


@dataclass(frozen=True)
class TofinoOptions:
    """The compiled program, how to pack it, arbitration, TLS, batching, queue units."""

    #: ``p4c-barefoot``'s output directory (or its ``.conf`` file): bfrt.json, context, binary.
    program: Path
    device_config: DeviceConfigFormat = DeviceConfigFormat.STRATUM
    p4info: Path = TNA_P4INFO_PATH
    election_id: int = 10
    credentials: fy.GRPCCredentialsTLS | None = None
    max_batch: int = DEFAULT_MAX_BATCH
    #: Queue cells one intent packet counts as in ECN and trimming thresholds.
    cells_per_packet: int = DEFAULT_CELLS_PER_PACKET


class TofinoSouthbound(P4RuntimeSouthbound):
    """:class:`P4RuntimeSouthbound` for Tofino switches running the TNA program."""

    def __init__(
        self,
        endpoints: Sequence[SwitchEndpoint],
        options: TofinoOptions,
        device_ports: Mapping[str, DevicePorts],
    ) -> None:
        blob = pack_device_config(read_program(options.program), options.device_config)
        tables = [table.name for table in fy.P4Schema(options.p4info).tables]
        super().__init__(
            endpoints,
            P4RuntimeOptions(
                p4info=options.p4info,
                p4blob=blob,
                election_id=options.election_id,
                credentials=options.credentials,
                max_batch=options.max_batch,
                adapter=tna_adapter(tables, options.cells_per_packet),
            ),
            TrimSessions(
                self._primary_switch, device_ports, TRIM_CLASS_OF_SERVICE[options.device_config]
            ),
            device_ports,
        )

    def _primary_switch(self, name: str) -> fy.Switch | None:
        switch = self._switches.get(name)
        if switch is None or not switch.is_up or not switch.is_primary:
            return None
        return switch
