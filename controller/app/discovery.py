"""How the controller finds its links: the evidence it watches and, for probes, their timing.

The settings come from the topology's ``settings.lldp`` unless given explicitly; the probe loop
(:mod:`controller.app.probing`) and the carrier watch (:mod:`controller.app.carrier`) read them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from controller.southbound.interface import LinkEvidence
from topologies.model import Topology

#: How long a probe may be under way before it can count as missed, in probe intervals: a
#: BMv2 on a busy machine hands probes up 10-20 ms late at times.
FLIGHT_INTERVALS = 2
#: Silence (no probe handed up at all) that counts as a dead switch: intervals, and a floor. A
#: lost channel (the usual way a switch dies) does not wait for it; stalls of 100 ms and more
#: happen when a small machine runs many BMv2s, so it is generous.
SILENCE_INTERVALS = 50
MIN_SILENCE_S = 0.500


@dataclass(frozen=True)
class DiscoverySettings:
    """Link discovery: probe interval, misses that mean down, and whom to probe."""

    enabled: bool = True
    evidence: LinkEvidence = LinkEvidence.PROBES
    interval_s: float = 0.010
    miss_limit: int = 3
    #: How long a probe may take to arrive before it can count as missed.
    flight_allowance_s: float = 0.020
    #: How long a switch may hand up no probe at all before probes toward it count as missed
    #: without newer ones arriving (see :mod:`controller.app.liveness`).
    silence_s: float = 0.500
    probe_host_ports: bool = True
    #: After the controller starts, how long a switch that never connected has before the
    #: probes toward it count as missed (then its links go down).
    startup_grace_s: float = 10.0

    @property
    def probe_ttl_s(self) -> int:
        """LLDP TTL advertised in probes: how long the information stays valid."""
        return max(1, math.ceil(self.interval_s * self.miss_limit))

    def watches(self, evidence: LinkEvidence) -> bool:
        """Whether discovery is on and links are watched by ``evidence``."""
        return self.enabled and self.evidence is evidence


def discovery_settings(
    topology: Topology,
    *,
    enabled: bool = True,
    evidence: LinkEvidence = LinkEvidence.PROBES,
    interval_ms: int | None = None,
    miss_limit: int | None = None,
    probe_host_ports: bool = True,
) -> DiscoverySettings:
    """Discovery settings: explicit values, else the topology's ``settings.lldp``.

    A probe may take two intervals to arrive before it can count as missed; a switch may be
    silent for 50 intervals (at least 500 ms) before silence alone counts.
    """
    interval_s = (interval_ms or topology.settings.lldp.interval_ms) / 1000
    return DiscoverySettings(
        enabled=enabled,
        evidence=evidence,
        interval_s=interval_s,
        miss_limit=miss_limit or topology.settings.lldp.miss_limit,
        flight_allowance_s=FLIGHT_INTERVALS * interval_s,
        silence_s=max(SILENCE_INTERVALS * interval_s, MIN_SILENCE_S),
        probe_host_ports=probe_host_ports,
    )
