"""Diffing what a switch holds against its intent: only the difference, in an order that keeps
every reference valid, tolerant of PI's watch_port read-back quirk."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.intent import compute_intent
from controller.southbound import p4_program as p4
from controller.southbound.mapping import desired_records
from controller.southbound.plan import Operation, Update, groups_match, plan_writes
from controller.southbound.records import (
    ActionCall,
    GroupMemberRef,
    GroupRecord,
    Level,
    MemberRecord,
    Record,
    RecordSet,
    TableEntryRecord,
)
from topologies import LinkId, load_topology

TOPOLOGY = load_topology("leaf-spine")
HEALTHY = compute_intent(TOPOLOGY)
SPINE_LINKS = [link.id for link in TOPOLOGY.links]


def _records(switch: str, down: frozenset[LinkId] = frozenset()) -> RecordSet:
    return desired_records(compute_intent(TOPOLOGY, down).switch(switch))


def _group(group_id: int, *members: tuple[int, int | None]) -> GroupRecord:
    return GroupRecord.of(
        p4.HASHED_SELECTOR, group_id, (GroupMemberRef(m, 1, w) for m, w in members)
    )


def test_an_empty_switch_gets_everything_inserted_members_first_then_groups_then_entries():
    desired = _records("l1")
    plan = plan_writes(RecordSet(), desired)
    assert plan.count(Operation.INSERT) + plan.count(Operation.MODIFY) == len(desired)
    levels = [phase[0].record.level for phase in plan.phases]
    assert levels == [Level.MEMBER, Level.GROUP, Level.TABLE]
    assert all(u.record.level == phase[0].record.level for phase in plan.phases for u in phase)


def test_a_default_entry_is_modified_never_inserted():
    plan = plan_writes(RecordSet(), _records("l1"))
    defaults = [u for u in plan.updates if getattr(u.record, "is_default", False)]
    # trim_dscp's re-marking values and ev_field's structured EV field (NoAction under ECMP).
    assert [u.operation for u in defaults] == [Operation.MODIFY, Operation.MODIFY]


def test_a_switch_that_holds_its_intent_needs_no_write():
    assert plan_writes(_records("l1"), _records("l1")).is_empty


def test_a_failed_spine_link_is_a_group_modify_and_nothing_else():
    l2_s1 = next(link for link in SPINE_LINKS if {link.a.node, link.b.node} == {"l2", "s1"})
    plan = plan_writes(_records("l1"), _records("l1", frozenset({l2_s1})))
    assert [u.operation for u in plan.updates] == [Operation.MODIFY]
    (update,) = plan.updates
    assert isinstance(update.record, GroupRecord)
    # Port 3 (the anchor) is gone: port 4's twin is the new anchor, 5 and 6 stay watched.
    assert [m.watch_port for m in update.record.members] == [5, 6, None]


def test_removal_deletes_entries_before_groups_before_members():
    held = RecordSet(
        [
            MemberRecord(p4.HASHED_SELECTOR, 1, ActionCall.of(p4.ROUTING_HASHED, port=1)),
            _group(7, (1, 1)),
            TableEntryRecord(p4.NEXT_HASHED, (("next_id", 7),), group_id=7),
        ]
    )
    plan = plan_writes(held, RecordSet())
    assert [(u.operation, u.record.level) for u in plan.updates] == [
        (Operation.DELETE, Level.TABLE),
        (Operation.DELETE, Level.GROUP),
        (Operation.DELETE, Level.MEMBER),
    ]
    assert len(plan.phases) == 3


def test_a_held_default_entry_the_intent_does_not_mention_is_left_alone():
    held = RecordSet(
        [
            TableEntryRecord(
                p4.TRIM_DSCP,
                (),
                ActionCall.of(p4.SET_TRIM_DSCP, trimmed=1, trimmed_lasthop=2),
                is_default=True,
            )
        ]
    )
    assert plan_writes(held, RecordSet()).is_empty


def test_a_stale_entry_the_intent_lacks_is_deleted_with_its_held_value():
    stale = TableEntryRecord(
        p4.ROUTES_V4, (("ipv4_dst", (0x0B000000, 8)),), ActionCall.of(p4.SET_NEXT_ID, next_id=9)
    )
    held = RecordSet([*_records("l1").values(), stale])
    plan = plan_writes(held, _records("l1"))
    assert plan.updates == (Update(Operation.DELETE, stale),)


def test_a_group_read_back_with_the_last_members_watch_port_everywhere_counts_as_equal():
    desired = _group(3, (3, 3), (4, 4), (5, 5), (6, 6))
    quirky = _group(3, (3, 6), (4, 6), (5, 6), (6, 6))
    assert groups_match(quirky, desired)
    held = RecordSet([quirky])
    assert plan_writes(held, RecordSet([desired])).is_empty


def test_the_quirk_tolerance_still_sees_a_missing_member():
    desired = _group(3, (3, 3), (4, 4), (5, 5))
    held = _group(3, (3, 5), (4, 5))
    assert not groups_match(held, desired)
    plan = plan_writes(RecordSet([held]), RecordSet([desired]))
    assert plan.updates == (Update(Operation.MODIFY, desired),)


def test_the_quirk_tolerance_still_sees_a_watch_port_no_desired_member_watches():
    desired = _group(3, (3, 3), (4, 4))
    assert not groups_match(_group(3, (3, 9), (4, 9)), desired)


def test_the_quirk_tolerance_still_sees_mixed_wrong_watch_ports():
    desired = _group(3, (3, 3), (4, 4), (5, 5))
    assert not groups_match(_group(3, (3, 4), (4, 3), (5, 5)), desired)


def test_the_quirk_tolerance_still_sees_a_changed_weight():
    desired = _group(3, (3, 3), (4, 4))
    heavier = GroupRecord.of(
        p4.HASHED_SELECTOR, 3, [GroupMemberRef(3, 2, 4), GroupMemberRef(4, 1, 4)]
    )
    assert not groups_match(heavier, desired)


def _apply(held: dict, update: Update) -> None:
    key = update.record.key
    if update.operation is Operation.INSERT:
        assert key not in held, f"insert of a held key: {update.describe()}"
        held[key] = update.record
    elif update.operation is Operation.MODIFY:
        is_default = getattr(update.record, "is_default", False)
        assert key in held or is_default, f"modify of a missing key: {update.describe()}"
        held[key] = update.record
    else:
        assert key in held, f"delete of a missing key: {update.describe()}"
        del held[key]


def _references_valid(held: dict) -> bool:
    records: list[Record] = list(held.values())
    members = {r.member_id for r in records if isinstance(r, MemberRecord)}
    groups = {r.group_id for r in records if isinstance(r, GroupRecord)}
    for record in records:
        if isinstance(record, GroupRecord) and any(
            m.member_id not in members for m in record.members
        ):
            return False
        if (
            isinstance(record, TableEntryRecord)
            and record.group_id is not None
            and record.group_id not in groups
        ):
            return False
    return True


link_sets = st.sets(st.sampled_from(SPINE_LINKS), max_size=len(SPINE_LINKS)).map(frozenset)


@settings(max_examples=40, deadline=None)
@given(
    before=link_sets,
    after=link_sets,
    switch=st.sampled_from(["l1", "l2", "s1", "s3"]),
    unwatch=st.booleans(),
)
def test_applying_a_plan_phase_by_phase_reaches_the_intent_with_valid_references_throughout(
    before, after, switch, unwatch
):
    held_records = _records(switch, before)
    desired = _records(switch, after)
    plan = plan_writes(held_records, desired, unwatch_departing=unwatch)
    state = dict(held_records.items())
    for phase in plan.phases:
        for update in phase:
            _apply(state, update)
        assert _references_valid(state), "a phase left a dangling reference"
    assert RecordSet(state.values()) == desired


@settings(max_examples=25, deadline=None)
@given(switch=st.sampled_from(["l1", "s2"]), drop=st.integers(min_value=0, max_value=30))
def test_a_switch_that_lost_some_entities_gets_exactly_those_back(switch, drop):
    desired = _records(switch)
    kept = [r for i, r in enumerate(desired.values()) if i % 31 != drop]
    lost = len(desired) - len(kept)
    plan = plan_writes(RecordSet(kept), desired)
    assert len(plan) == lost
    assert all(u.operation in (Operation.INSERT, Operation.MODIFY) for u in plan.updates)


def test_updates_describe_their_entity_for_the_log():
    record = TableEntryRecord(
        p4.ROUTES_V4,
        (("ipv4_dst", (0x0A000201, 32)),),
        ActionCall.of(p4.SET_NEXT_ID, next_id=3),
    )
    text = Update(Operation.INSERT, record).describe()
    assert text == "insert MrcIngress.routing.routes_v4[ipv4_dst=0xa000201/32] -> " + (
        "MrcIngress.routing.set_next_id(next_id=3)"
    )


def test_a_group_losing_a_member_first_drops_only_that_members_watch_port():
    held = RecordSet([_group(3, (3, 3), (4, 4), (5, 5))])
    desired = RecordSet([_group(3, (4, 4), (5, 5))])
    plan = plan_writes(held, desired, unwatch_departing=True)
    assert [[u.record for u in phase] for phase in plan.phases] == [
        [_group(3, (3, None), (4, 4), (5, 5))],
        [_group(3, (4, 4), (5, 5))],
    ]


def test_a_swapped_member_joins_only_after_the_departing_one_was_unwatched():
    held = RecordSet([_group(3, (3, 3), (4, 4))])
    desired = RecordSet([_group(3, (3, 3), (5, 5))])
    interim, final = plan_writes(held, desired, unwatch_departing=True).phases
    assert interim == (Update(Operation.MODIFY, _group(3, (3, 3), (4, None))),)
    assert final == (Update(Operation.MODIFY, _group(3, (3, 3), (5, 5))),)


def test_a_group_that_only_gains_members_needs_no_interim_step():
    held = RecordSet([_group(3, (3, 3))])
    desired = RecordSet([_group(3, (3, 3), (4, 4))])
    assert len(plan_writes(held, desired, unwatch_departing=True)) == 1


def test_without_the_workaround_a_shrinking_group_is_one_modify():
    held = RecordSet([_group(3, (3, 3), (4, 4))])
    desired = RecordSet([_group(3, (4, 4))])
    assert plan_writes(held, desired).updates == (Update(Operation.MODIFY, _group(3, (4, 4))),)
