"""Link state from the carrier of switch ports, for targets that report it (the linux one).

Sans-IO and clock-free like :mod:`controller.app.liveness`, and producing the same
:class:`LinkChange` records, so the fabric reacts to a carrier loss exactly as to missed
probes. A link is down when any of its switch ends is down, and up when all of them are up
(a host link has one switch end: the host side cannot be watched, and a cut from the host
side takes the switch port's carrier anyway). A switch end is down when its port has lost
carrier, or when its switch is lost (its namespace went away: its neighbours' ports may keep
their carrier through the patch panel, but nothing forwards there) until the switch is back in
service, reprogrammed.

Every link starts up (as the topology lists it) and ports nobody reported are taken as up:
the first intent uses every link, and a carrier report takes a dead one out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from controller.app.liveness import LinkChange, LinkState, LinkStatus
from topologies.model import Endpoint, Link, LinkId


@dataclass
class _Record:
    ends: tuple[Endpoint, ...]
    state: LinkState = LinkState.UP
    changed_at: float | None = None


class CarrierMonitor:
    """Liveness of every listed link (host links too) from port carrier and switch presence."""

    def __init__(self, links: Iterable[Link], switches: Collection[str]) -> None:
        self._links: dict[LinkId, _Record] = {}
        self._by_switch: dict[str, list[LinkId]] = {}
        self._down_ports: set[Endpoint] = set()
        self._lost: set[str] = set()
        for link in links:
            ends = tuple(end for end in (link.a, link.b) if end.node in switches)
            if link.id in self._links:
                raise ValueError(f"link {link.id} listed twice")
            self._links[link.id] = _Record(ends)
            for end in ends:
                self._by_switch.setdefault(end.node, []).append(link.id)

    def port_status(self, switch: str, port: int, up: bool, at: float) -> list[LinkChange]:
        """``port`` of ``switch`` gained or lost carrier at ``at``; the links that changed."""
        end = Endpoint(switch, port)
        if up:
            self._down_ports.discard(end)
        else:
            self._down_ports.add(end)
        return self._evaluate(self._links_at(end), at)

    def switch_lost(self, switch: str, at: float) -> list[LinkChange]:
        """``switch`` is gone (or never came): its links are down until it is found."""
        self._lost.add(switch)
        return self._evaluate(self._by_switch.get(switch, ()), at)

    def switch_found(self, switch: str, at: float) -> list[LinkChange]:
        """``switch`` is in service again: its links follow its ports' carrier."""
        self._lost.discard(switch)
        return self._evaluate(self._by_switch.get(switch, ()), at)

    def status(self) -> Mapping[LinkId, LinkStatus]:
        """Every link with its state."""
        return {
            link: LinkStatus(record.state, record.changed_at)
            for link, record in self._links.items()
        }

    def down_links(self) -> frozenset[LinkId]:
        """The links currently down."""
        return frozenset(
            link for link, record in self._links.items() if record.state is LinkState.DOWN
        )

    def _links_at(self, end: Endpoint) -> list[LinkId]:
        return [link for link in self._by_switch.get(end.node, ()) if end in self._links[link].ends]

    def _end_up(self, end: Endpoint) -> bool:
        return end not in self._down_ports and end.node not in self._lost

    def _evaluate(self, links: Iterable[LinkId], at: float) -> list[LinkChange]:
        changes = []
        for link in links:
            record = self._links[link]
            state = (
                LinkState.UP if all(self._end_up(end) for end in record.ends) else LinkState.DOWN
            )
            if state is not record.state:
                record.state = state
                record.changed_at = at
                changes.append(LinkChange(link, state, at, at))
        return changes
