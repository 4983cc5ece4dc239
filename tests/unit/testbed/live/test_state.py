"""The page's model: a sending connection's goodput is the growth of bytes_acked between
polls; a reused qp (bytes_acked went back) starts over; receiving halves are not transfers;
a connection stays listed FINISHED_KEPT_S after its counters stop, then goes; the testbed's
cuts mark links even where the controller does not track them."""

from __future__ import annotations

from testbed.live.state import FINISHED_KEPT_S, LiveState
from tests.unit.testbed.live.fake_sources import sending_connection
from topologies import load_topology


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _state() -> tuple[LiveState, Clock]:
    clock = Clock()
    return LiveState(load_topology("leaf-spine"), can_restart=True, clock=clock), clock


def _poll(state: LiveState, *connections: dict) -> None:
    state.apply_agent("h1", {"planes": [], "connections": list(connections)})


def test_goodput_is_acked_growth_between_polls():
    state, clock = _state()
    _poll(state, sending_connection(1, 1_000))
    clock.now += 0.5
    _poll(state, sending_connection(1, 1_000 + 500_000))
    (connection,) = state.update_json()["connections"]
    assert connection["goodput_bps"] == 500_000 * 8 / 0.5
    assert connection["history"] == [8e6] and connection["active"] is True


def test_a_reused_qp_starts_over_and_receivers_are_not_listed():
    state, clock = _state()
    _poll(state, sending_connection(1, 9_000_000))
    clock.now += 1
    receiving = {"qp": 2, "data_packets_sent": 0, "data_bytes_received": 5}
    _poll(state, sending_connection(1, 1_000), receiving)
    (connection,) = state.update_json()["connections"]
    assert connection["qp"] == 1 and connection["history"] == []


def test_a_quiet_connection_goes_after_the_grace_period():
    state, clock = _state()
    quiet = {**sending_connection(1, 1_000), "bytes_in_flight": 0}
    _poll(state, quiet)
    clock.now += 1
    _poll(state, quiet)
    assert state.update_json()["connections"][0]["active"] is True  # moved 1 s ago
    clock.now += FINISHED_KEPT_S / 2
    assert state.update_json()["connections"][0]["active"] is False
    clock.now += FINISHED_KEPT_S
    assert state.update_json()["connections"] == []


def test_cuts_mark_untracked_links_and_the_layout_is_complete():
    state, _ = _state()
    state.set_cut(frozenset({"h1:0<->l1:1"}))
    links = state.update_json()["links"]
    assert links["h1:0<->l1:1"]["cut"] is True and links["h1:0<->l1:1"]["state"] == "untracked"
    layout = state.layout_json()
    assert layout["can_restart"] is True
    assert {(link["source"], link["target"]) for link in layout["links"]} >= {("h1", "l1")}


def test_an_unanswering_agent_is_reported():
    state, _ = _state()
    state.agent_unavailable("h2", "connection refused")
    assert state.update_json()["agents"]["h2"] == {"ok": False, "error": "connection refused"}
