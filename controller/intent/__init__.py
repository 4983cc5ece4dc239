"""The controller's intent layer: what every switch should hold, as plain frozen data.

Computed from a topology and the set of links that are down; independent of P4 names, gRPC and
asyncio (an import-linter contract keeps it so), hence unit-testable without a switch.

    intent = compute_intent(topology, down={LinkId.between(a, b)})
    changes = diff_intents(previous, intent)
"""

from controller.intent.compute import compute_intent
from controller.intent.diff import (
    FabricDiff,
    SwitchDiff,
    TableDiff,
    diff_intents,
    diff_switch,
    diff_table,
)
from controller.intent.model import (
    DscpRule,
    FabricIntent,
    LldpIntent,
    NextHopGroup,
    NextHopMember,
    PortIntent,
    Route,
    SwitchIntent,
)

__all__ = [
    "DscpRule",
    "FabricDiff",
    "FabricIntent",
    "LldpIntent",
    "NextHopGroup",
    "NextHopMember",
    "PortIntent",
    "Route",
    "SwitchDiff",
    "SwitchIntent",
    "TableDiff",
    "compute_intent",
    "diff_intents",
    "diff_switch",
    "diff_table",
]
