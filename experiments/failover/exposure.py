"""Whether a cut hit a flow (its exposure), from what the cut element carried before the cut.

A cut drawn at random (``cut_choice=random``) may miss a one-path flow altogether, and a RoCE
QP that lost no packet says nothing of how RoCE survives a failure: each run's figures are
read beside its exposure. It comes from the loads the placement reads
(:class:`experiments.placements.Loads`, between the run's start and the probe before the
cut): the share of the traffic into a flow's scope (its destination's leaves for ``remote``
and ``switch``, its source's leaves for ``local``, its source host for ``nic``) that the cut
element carried, by bytes where the counters keep them and by packets where they do not.

* A flow alone in its scope (no other flow of the run sends data or acknowledgements into
  it) was exposed when that share is at least :data:`EXPOSED_SHARE`: below it, what the
  element carried is the fabric's own traffic (the agents' TCP side channel, LLDP on BMv2's
  port counters), not a path of the flow.
* A flow that shares its scope (``reboot``'s flows both ways) was not exposed when the
  element carried nothing into it; otherwise the counters cannot tell whose traffic it
  carried. Its exposure is then unknown (None), as it is when the counters were not read or
  counted nothing into its scope: never guessed.

A run was exposed when a flow was, or when the element carried at least
:data:`EXPOSED_SHARE` of the traffic into a shared scope (some of the run's flows, data or
acknowledgements, were hit, whichever they were); not exposed when no flow was; else unknown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from experiments.json_form import OMIT_NONE
from experiments.placements import Carried, Cut, Loads, Placement, leaves_of, scope_of
from topologies.model import Topology

#: The least share of a scope's traffic a cut element carries on a flow's path: one QP of 16
#: striped over four spines carries about 6 % of its bytes, the side channel well under 1 %.
EXPOSED_SHARE = 0.01
#: What a share is of: bytes where every counter read keeps them, packets otherwise.
BYTES = "bytes"
PACKETS = "packets"


@dataclass(frozen=True)
class FlowExposure:
    """Whether the cut element carried a flow's traffic (None: the counters cannot tell, see
    ``unknown``), the share of the traffic into the flow's scope it carried and its packets
    there (None: unread or nothing counted), what the share is of (bytes or packets), and
    the scope."""

    exposed: bool | None
    cut_share: float | None
    cut_packets: int | None
    share_of: str | None
    scope: tuple[str, ...]
    #: Why ``exposed`` is None.
    unknown: str | None = field(default=None, metadata=OMIT_NONE)


def flow_name(flow: tuple[str, str]) -> str:
    """A flow's name in a run's record: ``h1->h3``."""
    return f"{flow[0]}->{flow[1]}"


def flow_exposures(
    topology: Topology,
    placement: Placement,
    flows: Sequence[tuple[str, str]],
    cut: Cut,
    loads: Loads | None,
    unread: str | None = None,
) -> dict[str, FlowExposure]:
    """Each flow's exposure to ``cut`` (see the module's docstring); ``loads`` None when the
    counters could not be read (``unread`` says why)."""
    exposures = {}
    for flow in flows:
        scope = scope_of(topology, placement, flow)
        if loads is None:
            exposures[flow_name(flow)] = FlowExposure(
                None, None, None, None, scope, unknown=f"counters unread: {unread}"
            )
            continue
        others = [
            flow_name(other)
            for other in flows
            if other != flow and _reaches(topology, placement, other) & set(scope)
        ]
        exposures[flow_name(flow)] = _exposure(scope, cut, loads, others)
    return exposures


def run_exposed(exposures: Mapping[str, FlowExposure]) -> bool | None:
    """Whether the run's traffic was cut (see the module's docstring); None: unknown, or
    nothing was cut (no exposures)."""
    values = [exposure.exposed for exposure in exposures.values()]
    if any(value is True for value in values):
        return True
    if values and all(value is False for value in values):
        return False
    if any(e.cut_share is not None and e.cut_share >= EXPOSED_SHARE for e in exposures.values()):
        return True
    return None


def _exposure(scope: tuple[str, ...], cut: Cut, loads: Loads, others: list[str]) -> FlowExposure:
    counted = [
        carried
        for scopes in loads.carried.values()
        for name, carried in scopes.items()
        if name in scope
    ]
    hit = [carried for name, carried in loads.carried[cut.name].items() if name in scope]
    share_of = BYTES if all(c.byte_count is not None for c in counted) else PACKETS
    total, cut_amount = _amount(counted, share_of), _amount(hit, share_of)
    cut_packets = sum(carried.packets for carried in hit)
    if total == 0:
        return FlowExposure(
            None,
            None,
            cut_packets,
            share_of,
            scope,
            unknown=f"nothing was counted into {', '.join(scope)} before the probe",
        )
    share = cut_amount / total
    if not others:
        exposed: bool | None = share >= EXPOSED_SHARE
    elif cut_amount == 0:
        exposed = False
    else:
        exposed = None
    unknown = (
        None
        if exposed is not None
        else f"{', '.join(others)} also send(s) into {', '.join(scope)}: the counters cannot "
        "tell whose traffic the cut element carried"
    )
    return FlowExposure(exposed, share, cut_packets, share_of, scope, unknown)


def _amount(carried: list[Carried], share_of: str) -> int:
    if share_of == BYTES:
        return sum(c.byte_count or 0 for c in carried)
    return sum(c.packets for c in carried)


def _reaches(topology: Topology, placement: Placement, flow: tuple[str, str]) -> set[str]:
    """The scopes a flow's data or acknowledgements enter: its hosts' leaves, or its hosts
    (``nic``)."""
    if placement == Placement.NIC:
        return set(flow)
    return set(leaves_of(topology, flow))
