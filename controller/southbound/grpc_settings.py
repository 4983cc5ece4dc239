"""What the P4Runtime targets (``bmv2``, ``tofino``) read of the controller's configuration in
common: where each switch's gRPC server listens, TLS, arbitration and batching."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import finsy as fy

from controller.southbound.p4runtime import SwitchEndpoint, grpc_address
from controller.southbound.target import TargetSettingsError
from topologies.model import Topology


@dataclass(frozen=True)
class TlsConfig:
    """Certificates for gRPC over TLS; ``cert`` and ``key`` only for mutual TLS."""

    ca_cert: Path
    cert: Path | None = None
    key: Path | None = None
    target_name_override: str = ""


class GrpcSettings(Protocol):
    """The settings every P4Runtime target reads."""

    @property
    def switch_hosts(self) -> Mapping[str, str]: ...

    @property
    def tls(self) -> TlsConfig | None: ...

    @property
    def election_id(self) -> int: ...

    @property
    def max_batch(self) -> int: ...

    def host_of(self, switch: str) -> str: ...


def check_grpc(topology: Topology, settings: GrpcSettings) -> None:
    """Per-switch hosts must name switches of the topology; TLS files must exist."""
    unknown = set(settings.switch_hosts) - {switch.name for switch in topology.switches}
    if unknown:
        raise TargetSettingsError(
            f"switch_hosts names switches not in the topology: {sorted(unknown)}"
        )
    if settings.tls is not None:
        tls = settings.tls
        for tls_file in (tls.ca_cert, tls.cert, tls.key):
            if tls_file is not None and not tls_file.is_file():
                raise TargetSettingsError(f"TLS file {tls_file} not found")


def endpoints(topology: Topology, settings: GrpcSettings) -> list[SwitchEndpoint]:
    """Where each switch of ``topology`` serves P4Runtime, and its device id."""
    return [
        SwitchEndpoint(
            switch.name,
            grpc_address(settings.host_of(switch.name), switch.grpc_port),
            switch.device_id,
        )
        for switch in topology.switches
    ]


def credentials(tls: TlsConfig | None) -> fy.GRPCCredentialsTLS | None:
    """finsy's channel credentials for ``tls`` (None: plaintext)."""
    if tls is None:
        return None
    return fy.GRPCCredentialsTLS(
        cacert=tls.ca_cert,
        cert=tls.cert,
        private_key=tls.key,
        target_name_override=tls.target_name_override,
    )
