"""What to insert, modify and delete to turn one intent into another, table by table.

The southbound uses this twice: between the previous and the new intent after a link event (to
write only what changed), and between what it read back from a switch and the intent (to
reconcile after a restart). Both sides are the same types, compared by ``key`` and value.

A safe order for applying a :class:`SwitchDiff` keeps every reference valid at every step:
members (insert, modify), then groups (insert, modify), then routes (insert, modify, delete),
then groups (delete), then members (delete). Ports, DSCP rules and the settings are
independent of the rest.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

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


class Keyed(Protocol):
    """An intent entity: identified in its table by ``key``."""

    @property
    def key(self) -> Hashable: ...


E = TypeVar("E", bound=Keyed)


@dataclass(frozen=True)
class TableDiff(Generic[E]):
    """Changes to one table: new entities, entities whose value changed (new value), and
    entities to remove (old value)."""

    inserts: tuple[E, ...] = ()
    modifies: tuple[E, ...] = ()
    deletes: tuple[E, ...] = ()

    def __len__(self) -> int:
        return len(self.inserts) + len(self.modifies) + len(self.deletes)


def diff_table(old: Iterable[E], new: Iterable[E]) -> TableDiff[E]:
    """Compare two versions of a table; order follows ``new`` (inserts, modifies) and ``old``
    (deletes). Raises ValueError if either side holds a key twice."""
    old_by_key = _by_key(old, "old")
    new_by_key = _by_key(new, "new")
    inserts = tuple(entity for key, entity in new_by_key.items() if key not in old_by_key)
    modifies = tuple(
        entity
        for key, entity in new_by_key.items()
        if key in old_by_key and old_by_key[key] != entity
    )
    deletes = tuple(entity for key, entity in old_by_key.items() if key not in new_by_key)
    return TableDiff(inserts, modifies, deletes)


def _by_key(entities: Iterable[E], side: str) -> dict[Hashable, E]:
    by_key: dict[Hashable, E] = {}
    for entity in entities:
        if entity.key in by_key:
            raise ValueError(f"{side} table holds key {entity.key!r} twice")
        by_key[entity.key] = entity
    return by_key


@dataclass(frozen=True)
class SwitchDiff:
    """Everything that changes on one switch. ``cpu_port`` and ``lldp`` are the new values
    when they change (or are set for the first time), None otherwise."""

    switch: str
    routes_v4: TableDiff[Route] = field(default_factory=TableDiff)
    routes_v6: TableDiff[Route] = field(default_factory=TableDiff)
    groups: TableDiff[NextHopGroup] = field(default_factory=TableDiff)
    members: TableDiff[NextHopMember] = field(default_factory=TableDiff)
    ports: TableDiff[PortIntent] = field(default_factory=TableDiff)
    dscp_rules: TableDiff[DscpRule] = field(default_factory=TableDiff)
    ev_uplinks: TableDiff[EvUplink] = field(default_factory=TableDiff)
    local_usids: TableDiff[LocalUsid] = field(default_factory=TableDiff)
    usid_next_hops: TableDiff[UsidNextHop] = field(default_factory=TableDiff)
    cpu_port: int | None = None
    lldp: LldpIntent | None = None
    #: The new structured EV field when it changes; ``ev_field_cleared`` when it goes away.
    ev_field: EvFieldIntent | None = None
    ev_field_cleared: bool = False

    @property
    def change_count(self) -> int:
        """Number of entity writes (settings count one each)."""
        tables = (
            self.routes_v4,
            self.routes_v6,
            self.groups,
            self.members,
            self.ports,
            self.dscp_rules,
            self.ev_uplinks,
            self.local_usids,
            self.usid_next_hops,
        )
        settings = (
            (self.cpu_port is not None)
            + (self.lldp is not None)
            + (self.ev_field is not None or self.ev_field_cleared)
        )
        return sum(len(table) for table in tables) + settings

    @property
    def is_empty(self) -> bool:
        """True when the switch already holds the new intent."""
        return self.change_count == 0


def diff_switch(old: SwitchIntent | None, new: SwitchIntent | None) -> SwitchDiff:
    """Changes from ``old`` to ``new`` for one switch; None stands for an empty switch (a new
    one, or one that leaves the topology)."""
    if old is not None and new is not None and old.switch != new.switch:
        raise ValueError(f"cannot diff switch {old.switch!r} against {new.switch!r}")
    if new is None:
        if old is None:
            raise ValueError("diff_switch needs at least one intent")
        return SwitchDiff(
            switch=old.switch,
            routes_v4=diff_table(old.routes_v4, ()),
            routes_v6=diff_table(old.routes_v6, ()),
            groups=diff_table(old.groups, ()),
            members=diff_table(old.members, ()),
            ports=diff_table(old.ports, ()),
            dscp_rules=diff_table(old.dscp_rules, ()),
            ev_uplinks=diff_table(old.ev_uplinks, ()),
            local_usids=diff_table(old.local_usids, ()),
            usid_next_hops=diff_table(old.usid_next_hops, ()),
            ev_field_cleared=old.ev_field is not None,
        )
    return SwitchDiff(
        switch=new.switch,
        routes_v4=diff_table(old.routes_v4 if old else (), new.routes_v4),
        routes_v6=diff_table(old.routes_v6 if old else (), new.routes_v6),
        groups=diff_table(old.groups if old else (), new.groups),
        members=diff_table(old.members if old else (), new.members),
        ports=diff_table(old.ports if old else (), new.ports),
        dscp_rules=diff_table(old.dscp_rules if old else (), new.dscp_rules),
        ev_uplinks=diff_table(old.ev_uplinks if old else (), new.ev_uplinks),
        local_usids=diff_table(old.local_usids if old else (), new.local_usids),
        usid_next_hops=diff_table(old.usid_next_hops if old else (), new.usid_next_hops),
        ev_field=None if old is not None and old.ev_field == new.ev_field else new.ev_field,
        ev_field_cleared=old is not None and old.ev_field is not None and new.ev_field is None,
        cpu_port=None if old is not None and old.cpu_port == new.cpu_port else new.cpu_port,
        lldp=None if old is not None and old.lldp == new.lldp else new.lldp,
    )


@dataclass(frozen=True)
class FabricDiff:
    """Per-switch changes, for the switches that have any, in the new intent's order."""

    switches: tuple[SwitchDiff, ...]

    @property
    def change_count(self) -> int:
        """Total entity writes over all switches."""
        return sum(switch.change_count for switch in self.switches)

    @property
    def is_empty(self) -> bool:
        """True when nothing changes anywhere."""
        return not self.switches

    def switch(self, name: str) -> SwitchDiff | None:
        """The changes of switch ``name``, or None if it has none."""
        return next((diff for diff in self.switches if diff.switch == name), None)


def diff_intents(old: FabricIntent | None, new: FabricIntent) -> FabricDiff:
    """Changes from ``old`` (None: empty switches) to ``new`` over the whole fabric.

    Switches only in ``old`` come last, with everything deleted.
    """
    old_by_name = {} if old is None else {intent.switch: intent for intent in old.switches}
    new_names = {intent.switch for intent in new.switches}
    diffs = [diff_switch(old_by_name.get(intent.switch), intent) for intent in new.switches]
    diffs += [
        diff_switch(intent, None) for name, intent in old_by_name.items() if name not in new_names
    ]
    return FabricDiff(tuple(diff for diff in diffs if not diff.is_empty))
