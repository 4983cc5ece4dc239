"""The controller's intent layer: what every switch should hold, as plain frozen data.

Computed from a topology and the set of links that are down; independent of P4 names, gRPC and
asyncio (an import-linter contract keeps it so), hence unit-testable without a switch.

    intent = compute_intent(topology, down={LinkId.between(a, b)})
    changes = diff_intents(previous, intent)

The routing policy (:mod:`controller.intent.policy`: static, reactive, converge) decides which
down links the fabric-wide computation sees; ``routed_intent`` adds each switch's own pruning.
The path mode (``topologies.paths.PathMode``) adds the static tables of structured EV or SRv6
routing (:mod:`controller.intent.path_tables`).
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
    EvFieldIntent,
    EvUplink,
    FabricIntent,
    LldpIntent,
    LocalUsid,
    NextHopGroup,
    NextHopMember,
    PortIntent,
    Route,
    SwitchIntent,
    UsidNextHop,
)
from controller.intent.policy import (
    DEFAULT_CONVERGE_S,
    RoutingMode,
    RoutingPolicy,
    prune_dead_next_hops,
    routed_intent,
)

__all__ = [
    "DEFAULT_CONVERGE_S",
    "DscpRule",
    "EvFieldIntent",
    "EvUplink",
    "FabricDiff",
    "FabricIntent",
    "LldpIntent",
    "LocalUsid",
    "NextHopGroup",
    "NextHopMember",
    "PortIntent",
    "Route",
    "RoutingMode",
    "RoutingPolicy",
    "SwitchDiff",
    "SwitchIntent",
    "TableDiff",
    "UsidNextHop",
    "compute_intent",
    "diff_intents",
    "diff_switch",
    "diff_table",
    "prune_dead_next_hops",
    "routed_intent",
]
