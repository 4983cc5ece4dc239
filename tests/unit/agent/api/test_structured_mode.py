"""A host-API QP on an agent in structured EV mode (``mrc-agent serve --path-mode structured``)
gets its AUTO EVs from the agent's path chooser, not at random; a profile's own EVs still win."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from agent.api.types import CtlEvState, EvMode, EvOp, ProfileState
from agent.core import MrcConfig
from tests.unit.agent.api.harness import Agents, Endpoint, connect

OFF, ON = ProfileState.OFFLINE, ProfileState.ONLINE
#: What a chooser gives: EVs a random draw would practically never produce all of.
CHOSEN = tuple((0, 0xC0000000 | (index << 16)) for index in range(8))


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Agents]:
    made = Agents(tmp_path, MrcConfig(peer_timeout=0.5, ev_set_size=8))
    asked: list[tuple[tuple[bytes, ...], int]] = []

    def choose(peers: Sequence[bytes], count: int) -> tuple[tuple[int, int], ...]:
        asked.append((tuple(peers), count))
        return CHOSEN[:count]

    made.a.choose_evs = choose
    made.asked = asked  # type: ignore[attr-defined]
    yield made
    made.close()


def test_an_auto_qp_takes_the_chosen_evs(agents: Agents) -> None:
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    connect(a, b)
    assert [(plane, ev) for plane, ev, _ in _homes(agents, "a")] == list(CHOSEN)
    assert agents.asked == [((agents.b.local_addresses[0],), 8)]  # type: ignore[attr-defined]
    # The other agent has no chooser: its EVs are drawn as ever.
    assert {ev for _, ev, _ in _homes(agents, "b")}.isdisjoint(ev for _, ev in CHOSEN)


def _homes(agents: Agents, side: str) -> list[tuple[int, int, object]]:
    pool = (agents.a if side == "a" else agents.b).pool
    (qp,) = pool.qps
    endpoint = pool.owner(qp)
    assert isinstance(endpoint, type(pool.default))
    return list(endpoint.ev_states(qp))


def test_an_auto_profile_lists_the_chosen_evs(agents: Agents) -> None:
    ctl = agents.controller("a")
    ctl.modify_ev_profile(2, profile_state=OFF, ev_mode=EvMode.AUTO, ev_count=8)
    ctl.modify_ev_profile(2, profile_state=ON)
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    connect(a, b, ev_profile_id=2)
    _, entries = ctl.query_ev_profile(2, EvOp.QUERY_EV_ARRAY)
    assert sorted(entry.ev.as_int(32) for entry in entries) == sorted(ev for _, ev in CHOSEN)
    assert all(entry.state is CtlEvState.GOOD for entry in entries)
