"""What the controller knows about one switch: shared by the fabric, which keeps it, and the
probe loop, which sends and takes probes only where it says the switch is in service."""

from __future__ import annotations

from dataclasses import dataclass

from controller.southbound.interface import ProgramResult, SwitchRole


@dataclass
class SwitchView:
    """What the controller knows about one switch."""

    role: SwitchRole | None = None
    in_service: bool = False
    #: Whether its channel was ever up since the controller started.
    ever_connected: bool = False
    last_result: ProgramResult | None = None
    last_ok_result: ProgramResult | None = None
