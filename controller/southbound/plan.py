"""What to write to turn what a switch holds into what it should hold, in a safe order.

The plan is a sequence of phases; each phase may go to the switch as one batch, and the phases
go one after the other, so that every reference is valid at every step whatever order a server
applies the updates of one batch in (P4Runtime lets it reorder them):

1. members: inserts and modifies;
   (1b. with ``unwatch_departing``: groups that lose members, first modified so that only the
   departing members lose their ``watch_port``; see below;)
2. groups: inserts and modifies (their members now exist);
3. table entries: inserts, modifies and deletes (the groups they select exist; no group is
   deleted yet, so a deleted entry never leaves one dangling);
4. groups: deletes (no entry selects them any more);
5. members: deletes (no group holds them any more).

Comparison tolerates PI's read-back quirk: BMv2 returns every member of an action-profile group
with the *last* member's ``watch_port`` (enforcement is right, only the read is wrong). A group
read back in that shape, with the right members and weights, counts as equal to the intent;
otherwise the controller would rewrite every multi-port group on every reconciliation, forever.

``unwatch_departing`` works around a second PI bug: removing a member that has a ``watch_port``
from a group (a modify) makes PI's server throw after the removal (``action_prof_mgr.cpp`` looks
the removed member up again to store its new watch port), so it answers UNKNOWN and skips the
rest of the group's update: a member swapped in by the same modify is never added. A member
without a watch port is removed cleanly, so each such group is first modified to drop only the
departing members' watch ports, then to its new membership, in two requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from controller.southbound.records import GroupMemberRef, GroupRecord, Level, Record, RecordSet


class Operation(StrEnum):
    """A P4Runtime update type."""

    INSERT = "insert"
    MODIFY = "modify"
    DELETE = "delete"


@dataclass(frozen=True)
class Update:
    """One write: an operation on a record (for a delete, the record as it was held)."""

    operation: Operation
    record: Record

    def describe(self) -> str:
        """One line for logs: the operation and the entity."""
        return f"{self.operation} {self.record.describe()}"


@dataclass(frozen=True)
class WritePlan:
    """Phases of updates; each phase depends only on the phases before it."""

    phases: tuple[tuple[Update, ...], ...]

    @property
    def updates(self) -> tuple[Update, ...]:
        """Every update, in execution order."""
        return tuple(update for phase in self.phases for update in phase)

    def __len__(self) -> int:
        return sum(len(phase) for phase in self.phases)

    @property
    def is_empty(self) -> bool:
        """True when the switch already holds what it should."""
        return len(self) == 0

    def count(self, operation: Operation) -> int:
        """How many updates of one operation the plan holds."""
        return sum(1 for update in self.updates if update.operation is operation)


def plan_writes(
    held: RecordSet, desired: RecordSet, *, unwatch_departing: bool = False
) -> WritePlan:
    """The updates that make ``held`` equal ``desired``, phased as the module explains.

    Default entries are modified, never inserted or deleted; a held default entry that the
    intent does not mention is left alone.
    """
    upserts: dict[Level, list[Update]] = {level: [] for level in Level}
    deletes: dict[Level, list[Update]] = {level: [] for level in Level}
    unwatch: list[Update] = []
    for key, wanted in desired.items():
        current = held.get(key)
        if current is None:
            operation = Operation.MODIFY if _is_default(wanted) else Operation.INSERT
            upserts[wanted.level].append(Update(operation, wanted))
        elif not records_match(current, wanted):
            upserts[wanted.level].append(Update(Operation.MODIFY, wanted))
            if unwatch_departing and isinstance(current, GroupRecord):
                interim = _unwatched_departures(current, _as_group(wanted))
                if interim is not None:
                    unwatch.append(Update(Operation.MODIFY, interim))
    for key, current in held.items():
        if key not in desired and not _is_default(current):
            deletes[current.level].append(Update(Operation.DELETE, current))
    phases = (
        tuple(upserts[Level.MEMBER]),
        tuple(unwatch),
        tuple(upserts[Level.GROUP]),
        tuple(upserts[Level.TABLE]) + tuple(deletes[Level.TABLE]),
        tuple(deletes[Level.GROUP]),
        tuple(deletes[Level.MEMBER]),
    )
    return WritePlan(tuple(phase for phase in phases if phase))


def records_match(held: Record, desired: Record) -> bool:
    """Whether a held record already implements the desired one (see the watch_port quirk)."""
    if held == desired:
        return True
    if isinstance(held, GroupRecord) and isinstance(desired, GroupRecord):
        return groups_match(held, desired)
    return False


def groups_match(held: GroupRecord, desired: GroupRecord) -> bool:
    """Equal groups, or the read-back shape of PI's quirk: the same members and weights, and
    every held member carrying one ``watch_port`` that one of the desired members watches."""
    if held == desired:
        return True
    if held.key != desired.key:
        return False
    if _members_without_watch(held) != _members_without_watch(desired):
        return False
    held_watch = {member.watch_port for member in held.members}
    if len(held_watch) != 1:
        return False
    (shared,) = held_watch
    return shared in {member.watch_port for member in desired.members}


def _unwatched_departures(held: GroupRecord, desired: GroupRecord) -> GroupRecord | None:
    """The interim group of the PI workaround: kept members as desired, departing members
    still in but without a watch port; None when no member departs."""
    wanted = {member.member_id for member in desired.members}
    departing = [member for member in held.members if member.member_id not in wanted]
    if not departing:
        return None
    held_ids = {member.member_id for member in held.members}
    kept = [member for member in desired.members if member.member_id in held_ids]
    unwatched = [GroupMemberRef(member.member_id, member.weight, None) for member in departing]
    return GroupRecord.of(held.profile, held.group_id, kept + unwatched)


def _as_group(record: Record) -> GroupRecord:
    if not isinstance(record, GroupRecord):
        raise TypeError(f"{record.describe()} is not a group")
    return record


def _members_without_watch(group: GroupRecord) -> list[tuple[int, int]]:
    return [(member.member_id, member.weight) for member in group.members]


def _is_default(record: Record) -> bool:
    return getattr(record, "is_default", False)
