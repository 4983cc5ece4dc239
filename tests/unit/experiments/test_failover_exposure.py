"""Whether a cut hit a flow, from what the cut element carried before the cut: exposed, not
exposed, or unknown where the counters cannot tell (unread, nothing counted, flows that share
the leaf)."""

from __future__ import annotations

import pytest

from experiments.failover.exposure import (
    BYTES,
    PACKETS,
    FlowExposure,
    flow_exposures,
    run_exposed,
)
from experiments.placements import Cut, Placement, Snapshot, candidates, loads
from tests.unit.experiments.statuses import member_status
from topologies import load_topology

LEAF_SPINE = load_topology("leaf-spine")
BEFORE = Snapshot(member_status({f"s{i}": {1: 0, 2: 0} for i in range(1, 5)}))


def _remote(name: str) -> Cut:
    (cut,) = [c for c in candidates(LEAF_SPINE, Placement.REMOTE, [("h1", "h3")]) if c.name == name]
    return cut


def _exposures(
    placement: Placement,
    flows: list[tuple[str, str]],
    cut: Cut,
    after: dict[str, dict[int, int]],
    byte_counts: dict[str, dict[int, int]] | None = None,
) -> dict[str, FlowExposure]:
    read = loads(LEAF_SPINE, placement, flows, BEFORE, Snapshot(member_status(after, byte_counts)))
    return flow_exposures(LEAF_SPINE, placement, flows, cut, read)


def test_a_one_path_flow_on_the_cut_downlink_was_exposed_and_one_elsewhere_was_not() -> None:
    # the flow went via s3; s1 carried only the side channel's few small packets
    after = {"s1": {2: 20}, "s2": {2: 0}, "s3": {2: 5000}, "s4": {2: 0}}
    sizes = {"s1": {2: 20 * 80}}
    hit = _exposures(Placement.REMOTE, [("h1", "h3")], _remote("s3:2-l2"), after, sizes)
    assert hit["h1->h3"] == FlowExposure(
        True, pytest.approx(5_000_000 / 5_001_600), 5000, BYTES, ("l2",)
    )
    missed = _exposures(Placement.REMOTE, [("h1", "h3")], _remote("s1:2-l2"), after, sizes)
    assert missed["h1->h3"].exposed is False and missed["h1->h3"].cut_packets == 20
    assert missed["h1->h3"].cut_share == pytest.approx(1600 / 5_001_600)
    assert run_exposed(hit) is True and run_exposed(missed) is False


def test_a_sprayed_flow_is_exposed_on_every_spine_it_sprayed_over() -> None:
    after = {f"s{i}": {2: 1000} for i in range(1, 5)}
    (exposure,) = _exposures(Placement.REMOTE, [("h1", "h3")], _remote("s4:2-l2"), after).values()
    assert (exposure.exposed, exposure.cut_share) == (True, 0.25)


def test_the_share_is_of_packets_where_the_counters_keep_no_bytes() -> None:
    two_plane = load_topology("two-plane")
    flows = [("h1", "h3")]
    read = loads(
        two_plane,
        Placement.NIC,
        flows,
        Snapshot({}, {"eth0": 0, "eth1": 0}),
        Snapshot({}, {"eth0": 300, "eth1": 100}),
    )
    (nic0, _) = candidates(two_plane, Placement.NIC, flows)
    (exposure,) = flow_exposures(two_plane, Placement.NIC, flows, nic0, read).values()
    assert (exposure.exposed, exposure.cut_share, exposure.share_of) == (True, 0.75, PACKETS)
    assert exposure.scope == ("h1",)


def test_counters_that_cannot_tell_give_no_exposure_rather_than_a_guess() -> None:
    cut = _remote("s3:2-l2")
    unread = flow_exposures(
        LEAF_SPINE, Placement.REMOTE, [("h1", "h3")], cut, None, "s4: timed out"
    )
    assert unread["h1->h3"] == FlowExposure(
        None, None, None, None, ("l2",), unknown="counters unread: s4: timed out"
    )
    # the flow sent nothing into l2 before the probe (it had failed): nothing to tell by
    silent = {f"s{i}": {2: 0} for i in range(1, 5)}
    (quiet,) = _exposures(Placement.REMOTE, [("h1", "h3")], cut, silent).values()
    assert quiet.exposed is None and quiet.unknown == "nothing was counted into l2 before the probe"
    assert run_exposed(unread) is None and run_exposed({}) is None


def test_flows_into_one_leaf_are_told_apart_only_when_the_cut_carried_none_of_them() -> None:
    flows = [("h1", "h3"), ("h2", "h4")]  # both into l2: the counters add them up
    split = {"s1": {2: 1000}, "s2": {2: 0}, "s3": {2: 1000}, "s4": {2: 0}}
    hit = _exposures(Placement.REMOTE, flows, _remote("s3:2-l2"), split)
    assert [e.exposed for e in hit.values()] == [None, None]
    assert hit["h1->h3"].cut_share == 0.5
    assert hit["h1->h3"].unknown == (
        "h2->h4 also send(s) into l2: the counters cannot tell whose traffic the cut element "
        "carried"
    )
    # whichever flow it was, half of what entered l2 crossed the cut: the run was exposed
    assert run_exposed(hit) is True
    missed = _exposures(Placement.REMOTE, flows, _remote("s2:2-l2"), split)
    assert [e.exposed for e in missed.values()] == [False, False]
    assert run_exposed(missed) is False


def test_a_flow_the_other_way_shares_the_leaf_its_acknowledgements_enter() -> None:
    flows = [("h1", "h3"), ("h4", "h2")]  # h4 -> h2's acknowledgements enter l2 too
    after = {"s1": {1: 900, 2: 30}, "s2": {1: 0, 2: 0}, "s3": {1: 0, 2: 900}, "s4": {}}
    switch = next(c for c in candidates(LEAF_SPINE, Placement.SWITCH, flows) if c.switch == "s1")
    exposures = _exposures(Placement.SWITCH, flows, switch, after)
    into_l2, into_l1 = exposures["h1->h3"], exposures["h4->h2"]
    assert into_l2.exposed is None and "h4->h2 also send(s) into l2" in (into_l2.unknown or "")
    assert into_l1.exposed is None and into_l1.cut_share == 1.0
    assert run_exposed(exposures) is True
