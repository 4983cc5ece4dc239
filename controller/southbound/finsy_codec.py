"""Records to finsy entities and back: the only module that knows finsy's entity classes.

Writing needs full P4Info names and values finsy can encode; reading gives aliases and ints.
Both directions go through the P4 schema so that the round trip
``record -> entity -> protobuf -> entity -> record`` is the identity; a unit test holds it to
that for every kind of record the mapping produces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import finsy as fy

from controller.southbound import p4_program as p4
from controller.southbound.plan import Operation, Update
from controller.southbound.records import (
    ActionCall,
    GroupMemberRef,
    GroupRecord,
    MatchValue,
    MemberRecord,
    Record,
    TableEntryRecord,
)

FinsyEntity = fy.P4TableEntry | fy.P4ActionProfileMember | fy.P4ActionProfileGroup


class UnmodelledEntity(ValueError):
    """A read-back entity that has no record form (a shape the controller never writes)."""


def to_entity(record: Record) -> FinsyEntity:
    """The finsy entity that writes ``record``."""
    if isinstance(record, MemberRecord):
        return fy.P4ActionProfileMember(
            record.profile, member_id=record.member_id, action=_table_action(record.action)
        )
    if isinstance(record, GroupRecord):
        return fy.P4ActionProfileGroup(
            record.profile,
            group_id=record.group_id,
            members=[
                fy.P4Member(
                    member.member_id,
                    weight=member.weight
                    if member.watch_port is None
                    else (member.weight, member.watch_port),
                )
                for member in record.members
            ],
        )
    action: fy.P4TableAction | fy.P4IndirectAction
    if record.group_id is not None:
        action = fy.P4IndirectAction(group_id=record.group_id)
    else:
        assert record.action is not None  # TableEntryRecord guarantees one of the two
        action = _table_action(record.action)
    return fy.P4TableEntry(
        record.table,
        match=None if record.is_default else fy.P4TableMatch(dict(record.match)),
        action=action,
        is_default_action=record.is_default,
    )


def to_update(update: Update) -> Any:
    """The finsy update (``+entity``, ``~entity`` or ``-entity``) for one planned update."""
    entity = to_entity(update.record)
    if update.operation is Operation.INSERT:
        return +entity
    if update.operation is Operation.MODIFY:
        return ~entity
    return -entity


def from_entity(entity: object, schema: fy.P4Schema) -> Record:
    """The record of a read-back entity; UnmodelledEntity for shapes outside the model."""
    if isinstance(entity, fy.P4ActionProfileMember):
        if entity.action is None:
            raise UnmodelledEntity(f"member {entity.member_id} without an action")
        return MemberRecord(
            schema.action_profiles[entity.action_profile_id].name,
            entity.member_id,
            _action_call(entity.action, schema),
        )
    if isinstance(entity, fy.P4ActionProfileGroup):
        return GroupRecord.of(
            schema.action_profiles[entity.action_profile_id].name,
            entity.group_id,
            (_member_ref(member) for member in entity.members or ()),
        )
    if isinstance(entity, fy.P4TableEntry):
        return _table_record(entity, schema)
    raise UnmodelledEntity(f"unexpected entity type {type(entity).__name__}")


def read_targets() -> list[FinsyEntity]:
    """Wildcard reads that return everything the controller manages on a switch."""
    targets: list[FinsyEntity] = [fy.P4TableEntry(table) for table in p4.MANAGED_TABLES]
    targets += [
        fy.P4TableEntry(table, is_default_action=True) for table in p4.MANAGED_DEFAULT_TABLES
    ]
    targets += [
        fy.P4ActionProfileMember(p4.HASHED_SELECTOR),
        fy.P4ActionProfileGroup(p4.HASHED_SELECTOR),
    ]
    return targets


def _table_action(call: ActionCall) -> fy.P4TableAction:
    return fy.P4TableAction(call.name, **dict(call.params))


def _action_call(action: fy.P4TableAction, schema: fy.P4Schema) -> ActionCall:
    return ActionCall(
        schema.actions[action.name].name,
        tuple(sorted((name, _as_int(value, name)) for name, value in action.args.items())),
    )


def _member_ref(member: fy.P4Member) -> GroupMemberRef:
    weight = member.weight
    if isinstance(weight, int):
        return GroupMemberRef(member.member_id, weight, None)
    if isinstance(weight, tuple) and len(weight) == 2:
        return GroupMemberRef(member.member_id, int(weight[0]), int(weight[1]))
    raise UnmodelledEntity(f"group member {member.member_id} with weight {weight!r}")


def _table_record(entry: fy.P4TableEntry, schema: fy.P4Schema) -> TableEntryRecord:
    table = schema.tables[entry.table_id].name
    match = tuple(sorted(_match_items(entry.match or {}, table)))
    action = entry.action
    if isinstance(action, fy.P4IndirectAction):
        if action.group_id is None:
            raise UnmodelledEntity(f"{table}: indirect action without a group")
        return TableEntryRecord(
            table, match, group_id=action.group_id, is_default=entry.is_default_action
        )
    if isinstance(action, fy.P4TableAction):
        return TableEntryRecord(
            table, match, _action_call(action, schema), is_default=entry.is_default_action
        )
    raise UnmodelledEntity(f"{table}: entry without an action")


def _match_items(match: Mapping[str, Any], table: str) -> list[tuple[str, MatchValue]]:
    items: list[tuple[str, MatchValue]] = []
    for name, value in match.items():
        if isinstance(value, int):
            items.append((name, value))
        elif (
            isinstance(value, tuple)
            and len(value) == 2
            and all(isinstance(part, int) for part in value)
        ):
            items.append((name, (value[0], value[1])))
        else:
            raise UnmodelledEntity(f"{table}: match {name}={value!r} is not exact or LPM")
    return items


def _as_int(value: object, name: str) -> int:
    if not isinstance(value, int):
        raise UnmodelledEntity(f"parameter {name}={value!r} is not an integer")
    return value
