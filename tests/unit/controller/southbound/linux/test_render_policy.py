"""What the kernel holds for the RoCE classes and for a statically pruned intent: the kernel
forwards RoCE and MRC alike by address (DSCP values change no route), names every class it
cannot queue apart, and has no route where the intent removed a group left with no member."""

from __future__ import annotations

from ipaddress import IPv4Network

from controller.intent import compute_intent, routed_intent
from controller.southbound.linux.render import render
from topologies import Topology, load_topology_text
from topologies.document import dump_document, explicit_document


def test_every_class_is_named_with_its_value_and_the_cnp_shares_the_data_queue(
    leaf_spine: Topology,
) -> None:
    (note,) = [
        n for n in render(compute_intent(leaf_spine).switch("l1")).unsupported if "DSCP" in n
    ]
    for spelled in ("roce_data=26", "roce_ack=28", "roce_cnp=48", "control=46", "trimmable=4"):
        assert spelled in note
    assert "RoCE CNPs share each port's one queue with data" in note
    assert "RoCE ACK/NAKs" in note


def test_the_lossless_roce_class_is_named_as_missing(leaf_spine: Topology) -> None:
    notes = render(compute_intent(leaf_spine).switch("l1")).unsupported
    assert (
        "no lossless RoCE class on the linux target (one tbf per port): RoCE data shares each "
        "port's one queue, and a full queue drops it at the tail"
    ) in notes


def test_renumbered_roce_classes_change_the_note_but_no_route(leaf_spine: Topology) -> None:
    document = explicit_document(leaf_spine)
    document["settings"]["dscp"]["roce_data"] = 30
    document["settings"]["dscp"]["roce_cnp"] = 40
    renumbered = load_topology_text(dump_document(document))
    before = render(compute_intent(leaf_spine).switch("l1"))
    after = render(compute_intent(renumbered).switch("l1"))
    assert after.state == before.state
    note = next(n for n in after.unsupported if "DSCP" in n)
    assert "roce_data=30" in note and "roce_cnp=40" in note


def test_a_static_leaf_with_every_uplink_dead_renders_no_route_toward_the_far_leaf(
    leaf_spine: Topology, link_between
) -> None:
    cuts = {link_between(leaf_spine, "l1", spine) for spine in ("s1", "s2", "s3", "s4")}
    state = render(routed_intent(leaf_spine, frozenset(), cuts).switch("l1")).state
    h3 = leaf_spine.host("h3").nics[0]
    assert IPv4Network(f"{h3.ipv4.ip}/32") not in state.routes
    assert h3.ipv4.network not in state.routes
    h2 = leaf_spine.host("h2").nics[0]
    assert [hop.port for hop in state.routes[IPv4Network(f"{h2.ipv4.ip}/32")].nexthops] == [2]


def test_a_static_far_leaf_keeps_every_spine_in_its_kernel_route(
    leaf_spine: Topology, link_between
) -> None:
    cut = {link_between(leaf_spine, "l1", "s1")}
    state = render(routed_intent(leaf_spine, frozenset(), cut).switch("l2")).state
    h1 = leaf_spine.host("h1").nics[0]
    assert [hop.port for hop in state.routes[IPv4Network(f"{h1.ipv4.ip}/32")].nexthops] == [
        3,
        4,
        5,
        6,
    ]
