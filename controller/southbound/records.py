"""P4 entities as canonical, hashable records: the form in which intent and read-back meet.

finsy's entities are mutable, compare by Python identity of nested dicts, and come back from a
read with aliases instead of full names and integers instead of the strings they were written
with. Records fix one canonical form (full P4Info names, every value an int, match fields and
action parameters sorted by name, group members sorted by member id), so that "what the switch
holds" and "what the intent wants" can be compared with ``==`` and kept in sets and dicts.

Every record has a ``key`` (its identity in its table or action profile) and a ``level``: the
dependency tier it lives on. Members are referenced by groups, groups by table entries, so
inserts go up the levels and deletes come down them (:mod:`controller.southbound.plan`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum

#: An exact match is an int; a longest-prefix match is (value, prefix length).
MatchValue = int | tuple[int, int]


class Level(IntEnum):
    """Dependency tier of a record: lower levels must exist before higher ones refer to them."""

    MEMBER = 0
    GROUP = 1
    TABLE = 2


@dataclass(frozen=True, order=True)
class ActionCall:
    """An action with its parameters, sorted by parameter name."""

    name: str
    params: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, name: str, **params: int) -> ActionCall:
        """Build from keyword parameters (the canonical order is applied here)."""
        return cls(name, tuple(sorted(params.items())))

    def __str__(self) -> str:
        args = ", ".join(f"{key}={value}" for key, value in self.params)
        return f"{self.name}({args})"


@dataclass(frozen=True)
class TableEntryRecord:
    """A table entry: a direct action, or a reference to an action-profile group.

    A default entry (``is_default``) has no match; it can only be modified, never inserted or
    deleted.
    """

    table: str
    match: tuple[tuple[str, MatchValue], ...]
    action: ActionCall | None = None
    group_id: int | None = None
    is_default: bool = False

    def __post_init__(self) -> None:
        if (self.action is None) == (self.group_id is None):
            raise ValueError(f"{self.table}: an entry needs exactly one of action and group_id")
        if self.is_default and self.match:
            raise ValueError(f"{self.table}: a default entry has no match")

    @property
    def key(self) -> Hashable:
        """Identity: the table and the match (or the default slot)."""
        return ("table", self.table, self.match, self.is_default)

    @property
    def level(self) -> Level:
        """Table entries refer to groups, so they come last on insert."""
        return Level.TABLE

    def describe(self) -> str:
        """One line naming the entry, for logs and error reports."""
        match = "default" if self.is_default else ", ".join(_format_match(m) for m in self.match)
        target = str(self.action) if self.action is not None else f"group {self.group_id}"
        return f"{self.table}[{match}] -> {target}"


@dataclass(frozen=True, order=True)
class GroupMemberRef:
    """One member of an action-profile group, with its weight and the port it watches."""

    member_id: int
    weight: int = 1
    watch_port: int | None = None


@dataclass(frozen=True)
class MemberRecord:
    """An action-profile member: an action that groups refer to by ``member_id``."""

    profile: str
    member_id: int
    action: ActionCall

    @property
    def key(self) -> Hashable:
        """Identity: the profile and the member id."""
        return ("member", self.profile, self.member_id)

    @property
    def level(self) -> Level:
        """Members are referenced by groups, so they come first on insert."""
        return Level.MEMBER

    def describe(self) -> str:
        """One line naming the member, for logs and error reports."""
        return f"{self.profile} member {self.member_id} -> {self.action}"


@dataclass(frozen=True)
class GroupRecord:
    """An action-profile group; ``members`` are kept sorted by member id."""

    profile: str
    group_id: int
    members: tuple[GroupMemberRef, ...]

    def __post_init__(self) -> None:
        if list(self.members) != sorted(self.members):
            raise ValueError(f"{self.profile} group {self.group_id}: members must be sorted")

    @classmethod
    def of(cls, profile: str, group_id: int, members: Iterable[GroupMemberRef]) -> GroupRecord:
        """Build with members in canonical (sorted) order."""
        return cls(profile, group_id, tuple(sorted(members)))

    @property
    def key(self) -> Hashable:
        """Identity: the profile and the group id."""
        return ("group", self.profile, self.group_id)

    @property
    def level(self) -> Level:
        """Groups sit between the members they hold and the table entries that use them."""
        return Level.GROUP

    def describe(self) -> str:
        """One line naming the group and its members, for logs and error reports."""
        members = ", ".join(
            f"{m.member_id}" + ("" if m.watch_port is None else f"@{m.watch_port}")
            for m in self.members
        )
        return f"{self.profile} group {self.group_id} [{members}]"


Record = TableEntryRecord | MemberRecord | GroupRecord


class RecordSet(Mapping[Hashable, Record]):
    """An immutable set of records indexed by key; a key may appear only once."""

    __slots__ = ("_by_key",)

    def __init__(self, records: Iterable[Record] = ()) -> None:
        by_key: dict[Hashable, Record] = {}
        for record in records:
            if record.key in by_key:
                raise ValueError(f"two records with one key: {record.describe()}")
            by_key[record.key] = record
        self._by_key = by_key

    def __getitem__(self, key: Hashable) -> Record:
        return self._by_key[key]

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecordSet):
            return NotImplemented
        return self._by_key == other._by_key

    def __hash__(self) -> int:
        return hash(frozenset(self._by_key.items()))

    def __repr__(self) -> str:
        return f"RecordSet({len(self)} records)"

    def records(self) -> tuple[Record, ...]:
        """Every record, in insertion order."""
        return tuple(self._by_key.values())

    def replacing(self, upserts: Iterable[Record], deletes: Iterable[Hashable]) -> RecordSet:
        """A copy with ``upserts`` stored (by key) and the keys in ``deletes`` removed."""
        by_key = dict(self._by_key)
        for key in deletes:
            by_key.pop(key, None)
        for record in upserts:
            by_key[record.key] = record
        return RecordSet(by_key.values())


def _format_match(item: tuple[str, MatchValue]) -> str:
    name, value = item
    if isinstance(value, tuple):
        return f"{name}={value[0]:#x}/{value[1]}"
    return f"{name}={value}"
