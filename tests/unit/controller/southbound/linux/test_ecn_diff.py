"""ECN markers in the plan: a marker is written (with its tbf re-asserted) where the wanted one
differs from the held one, replaced by the tbf's plain fifo where it is no longer wanted and the
tbf stays, and left to go with its tbf where the tbf is deleted. A marker of unknown origin is
read back by kind only (the child of ``1:1`` of a marking kind), so it is rewritten once."""

from __future__ import annotations

from controller.southbound.linux.diff import plan_changes
from controller.southbound.linux.ecn import EcnMarker
from controller.southbound.linux.namespace import MARKER_PARENT_ID, _marker_of
from controller.southbound.linux.state import KernelState
from hostenv.tbf import tbf_parameters

SHAPER = tbf_parameters(1000, 64)
RED = EcnMarker("red", ("limit", "69632b", "min", "10880b", "max", "43520b", "ecn"))
CODEL = EcnMarker("codel", ("limit", "64", "ce_threshold", "10000us", "ecn"))


def shaped(markers: dict[int, EcnMarker], ports: tuple[int, ...] = (3,)) -> KernelState:
    return KernelState(shapers={port: SHAPER for port in ports}, markers=markers)


def test_the_held_marker_needs_no_write() -> None:
    assert plan_changes(shaped({3: RED}), shaped({3: RED})).empty


def test_a_new_marker_is_an_insert_written_with_its_tbf() -> None:
    plan = plan_changes(shaped({3: RED}), shaped({}))
    assert plan.set_markers == ((3, SHAPER, RED),)
    assert (plan.inserts, plan.modifies, plan.deletes, plan.shaper_changes) == (1, 0, 0, 2)


def test_a_marker_of_another_kind_is_replaced() -> None:
    plan = plan_changes(shaped({3: RED}), shaped({3: CODEL}))
    assert plan.set_markers == ((3, SHAPER, RED),)
    assert plan.modifies == 1


def test_a_marker_known_by_kind_only_is_rewritten() -> None:
    plan = plan_changes(shaped({3: RED}), shaped({3: EcnMarker("red")}))
    assert plan.set_markers == ((3, SHAPER, RED),)


def test_a_rewritten_tbf_takes_its_unchanged_marker_along() -> None:
    slower = tbf_parameters(500, 64)
    held = KernelState(shapers={3: slower}, markers={3: RED})
    plan = plan_changes(shaped({3: RED}), held)
    assert plan.set_shapers == ()
    assert plan.set_markers == ((3, SHAPER, RED),)
    assert (plan.inserts, plan.modifies, plan.deletes) == (0, 1, 0)


def test_a_tbf_and_marker_both_new_are_one_write() -> None:
    plan = plan_changes(shaped({3: RED}), KernelState())
    assert (plan.set_shapers, plan.set_markers) == ((), ((3, SHAPER, RED),))
    assert plan.inserts == 2


def test_a_marker_no_longer_wanted_under_a_staying_tbf_is_unset() -> None:
    plan = plan_changes(shaped({}), shaped({3: RED}))
    assert plan.unset_markers == ((3, SHAPER),)
    assert (plan.deletes, plan.shaper_changes) == (1, 2)


def test_a_marker_goes_with_its_deleted_tbf_without_a_write_of_its_own() -> None:
    plan = plan_changes(KernelState(), shaped({3: RED}))
    assert plan.delete_shapers == (3,)
    assert (plan.set_markers, plan.unset_markers) == ((), ())
    assert plan.deletes == 1


def test_a_marker_without_a_wanted_tbf_is_never_written() -> None:
    plan = plan_changes(KernelState(markers={3: RED}), KernelState())
    assert plan.empty


def test_a_marking_child_of_the_tbf_is_read_back_by_kind() -> None:
    assert _marker_of({"kind": "red", "parent": MARKER_PARENT_ID}) == EcnMarker("red")
    assert _marker_of({"kind": "fq_codel", "parent": MARKER_PARENT_ID}) == EcnMarker("fq_codel")


def test_the_tbfs_plain_fifo_and_root_qdiscs_are_no_markers() -> None:
    assert _marker_of({"kind": "bfifo", "parent": MARKER_PARENT_ID}) is None
    assert _marker_of({"kind": "fq_codel", "parent": 0xFFFFFFFF}) is None
