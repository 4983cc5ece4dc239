"""The writes that take a namespace from the state it holds to the state wanted, in a safe
order.

Pure. Order: neighbours are set before the routes that use their gateways (a route via a
gateway without its permanent entry would make the kernel try to resolve a synthetic address);
routes are deleted before the neighbours they used; shapers last, as they touch no forwarding,
and ECN markers after the shapers they hang under. A marker is written with its port's ``tbf``,
re-asserted under the handle the marker's parent names, and a ``tbf`` written on a port that has
a marker is written with the marker (a ``tbf`` that was under another handle is replaced whole,
child and all); a marker no longer wanted under a ``tbf`` that stays is replaced by the
``tbf``'s plain fifo; one whose ``tbf`` goes goes with it. SRv6 seg6local routes are set after
the plain routes (the neighbours' uSID routes they hand carriers to) and deleted before them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from controller.southbound.linux.ecn import EcnMarker
from controller.southbound.linux.seg6 import Seg6LocalRoute
from controller.southbound.linux.state import KernelRoute, KernelState, Neighbour
from hostenv.tbf import MAX_FRAME_BYTES, TbfParameters

_K = TypeVar("_K")
_V = TypeVar("_V")

#: A ``tbf``'s bucket is stored in timer ticks; converting back to bytes can be a byte off.
BURST_TOLERANCE_BYTES = 1


@dataclass(frozen=True)
class KernelPlan:
    """Every write, grouped by kind; ``set_*`` entries are inserts and modifies alike (the
    kernel's replace), the counts tell them apart."""

    set_neighbours: tuple[Neighbour, ...] = ()
    set_routes: tuple[KernelRoute, ...] = ()
    set_seg6local: tuple[Seg6LocalRoute, ...] = ()
    delete_seg6local: tuple[Seg6LocalRoute, ...] = ()
    delete_routes: tuple[KernelRoute, ...] = ()
    delete_neighbours: tuple[Neighbour, ...] = ()
    set_shapers: tuple[tuple[int, TbfParameters], ...] = ()
    delete_shapers: tuple[int, ...] = ()
    #: (port, its tbf, the marker to write under it): the tbf and its child, two commands.
    set_markers: tuple[tuple[int, TbfParameters, EcnMarker], ...] = ()
    #: (port, its tbf, which stays) whose marker is replaced by the tbf's plain fifo: the tbf
    #: and its child, two commands.
    unset_markers: tuple[tuple[int, TbfParameters], ...] = ()
    inserts: int = 0
    modifies: int = 0
    deletes: int = 0

    @property
    def empty(self) -> bool:
        """Nothing to write."""
        return self.inserts + self.modifies + self.deletes == 0

    @property
    def shaper_changes(self) -> int:
        """Queue settings written (``tc`` commands, counted as queue commands like BMv2's
        Thrift calls)."""
        return (
            len(self.set_shapers)
            + len(self.delete_shapers)
            + 2 * (len(self.set_markers) + len(self.unset_markers))
        )


def plan_changes(wanted: KernelState, held: KernelState) -> KernelPlan:
    """What to write so that ``held`` becomes ``wanted``."""
    neighbours = _compare(wanted.neighbours, held.neighbours)
    # A prefix that changes kind (plain route <-> seg6local) is overwritten by the replace that
    # writes it, not deleted afterwards: the delete would remove the new route.
    routes = _compare(wanted.routes, _without(held.routes, wanted.seg6local))
    seg6local = _compare(wanted.seg6local, _without(held.seg6local, wanted.routes))
    shapers = _compare(wanted.shapers, held.shapers, same_shaper)
    # A marker lives only under a shaper: one without a wanted shaper is never wanted, and one
    # held under a shaper that is deleted goes with it.
    markers = _compare(
        {port: marker for port, marker in wanted.markers.items() if port in wanted.shapers},
        {port: marker for port, marker in held.markers.items() if port in held.shapers},
    )
    unset = tuple(port for port in markers.deleted_keys if port in wanted.shapers)
    # A tbf rewritten under a wanted marker takes the marker along (same count, one write).
    marker_writes = (
        *markers.set_keys,
        *(
            port
            for port in shapers.set_keys
            if port in wanted.markers and port not in markers.set_keys
        ),
    )
    with_child = {*marker_writes, *unset}
    kinds = (neighbours, routes, seg6local, shapers, markers)
    inserted = sum(kind.inserted for kind in kinds)
    modified = sum(kind.modified for kind in kinds)
    deleted = neighbours.deleted + routes.deleted + seg6local.deleted + shapers.deleted + len(unset)
    return KernelPlan(
        set_neighbours=tuple(wanted.neighbours[key] for key in neighbours.set_keys),
        set_routes=tuple(wanted.routes[key] for key in routes.set_keys),
        set_seg6local=tuple(wanted.seg6local[key] for key in seg6local.set_keys),
        delete_seg6local=tuple(held.seg6local[key] for key in seg6local.deleted_keys),
        delete_routes=tuple(held.routes[key] for key in routes.deleted_keys),
        delete_neighbours=tuple(held.neighbours[key] for key in neighbours.deleted_keys),
        set_shapers=tuple(
            (port, wanted.shapers[port]) for port in shapers.set_keys if port not in with_child
        ),
        delete_shapers=tuple(shapers.deleted_keys),
        set_markers=tuple(
            (port, wanted.shapers[port], wanted.markers[port]) for port in marker_writes
        ),
        unset_markers=tuple((port, wanted.shapers[port]) for port in unset),
        inserts=inserted,
        modifies=modified,
        deletes=deleted,
    )


def same_shaper(wanted: TbfParameters, held: TbfParameters) -> bool:
    """Whether the held ``tbf`` is the wanted one, up to the byte the kernel's tick rounding
    may cost the bucket."""
    return (
        wanted.rate_bits_per_s == held.rate_bits_per_s
        and wanted.limit_bytes == held.limit_bytes
        and abs(wanted.burst_bytes - held.burst_bytes) <= BURST_TOLERANCE_BYTES
    )


def burst_from_ticks(buffer_ticks: int, rate_bytes_per_s: int, ticks_per_us: float) -> int:
    """The bucket size in bytes of a ``tbf`` whose bucket the kernel holds as ``buffer_ticks``
    timer ticks (tc converts bytes to the time they take at the rate, then to ticks)."""
    if rate_bytes_per_s <= 0 or ticks_per_us <= 0:
        return MAX_FRAME_BYTES
    return round(buffer_ticks / ticks_per_us / 1_000_000 * rate_bytes_per_s)


def _without(held: Mapping[_K, _V], keys: Mapping[_K, object]) -> dict[_K, _V]:
    return {key: value for key, value in held.items() if key not in keys}


@dataclass(frozen=True)
class _Comparison(Generic[_K]):
    set_keys: tuple[_K, ...]
    deleted_keys: tuple[_K, ...]
    inserted: int
    modified: int

    @property
    def deleted(self) -> int:
        return len(self.deleted_keys)


def _compare(
    wanted: Mapping[_K, _V],
    held: Mapping[_K, _V],
    same: Callable[[_V, _V], bool] = operator.eq,
) -> _Comparison[_K]:
    set_keys: list[_K] = []
    inserted = modified = 0
    for key, value in wanted.items():
        if key not in held:
            inserted += 1
            set_keys.append(key)
        elif not same(value, held[key]):
            modified += 1
            set_keys.append(key)
    deleted = tuple(key for key in held if key not in wanted)
    return _Comparison(tuple(set_keys), deleted, inserted, modified)
