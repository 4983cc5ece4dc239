"""What the fabric's loss rules did over a run (``testbed.mininet.link_loss``: every fabric
link direction drops UDP 4791 at the rate asked for, never LLDP): the frames they saw and
dropped, the loss that made, and the LLDP frames they let through. The loss and collective
experiments record it, so that a run says the loss it got, not only the rate it asked for."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from experiments.json_form import OMIT_NONE


class RuleCounters(Protocol):
    """One link direction's rule: the UDP 4791 frames it matched and dropped."""

    @property
    def matched(self) -> int: ...

    @property
    def dropped(self) -> int: ...


@dataclass(frozen=True)
class DirectionLoss:
    """One link direction's frames seen and dropped."""

    seen: int
    dropped: int


@dataclass(frozen=True)
class FabricLoss:
    """Frames seen and dropped over every direction, the share dropped in percent (None when
    none was seen), the LLDP frames let through, and each direction's where recorded."""

    frames_seen: int
    frames_dropped: int
    measured_percent: float | None
    lldp_frames_passed: int
    per_direction: Mapping[str, DirectionLoss] | None = field(default=None, metadata=OMIT_NONE)


def fabric_loss(
    directions: Mapping[str, RuleCounters], lldp: int, per_direction: bool = False
) -> FabricLoss:
    """The rules' account from their counters (``Testbed.fabric_loss_counters``), with each
    direction's when ``per_direction``."""
    seen = sum(counters.matched for counters in directions.values())
    dropped = sum(counters.dropped for counters in directions.values())
    return FabricLoss(
        frames_seen=seen,
        frames_dropped=dropped,
        measured_percent=100 * dropped / seen if seen else None,
        lldp_frames_passed=lldp,
        per_direction={
            hop: DirectionLoss(c.matched, c.dropped) for hop, c in sorted(directions.items())
        }
        if per_direction
        else None,
    )
