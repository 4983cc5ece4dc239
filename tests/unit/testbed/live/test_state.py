"""The page's model: a sending connection's goodput is the growth of bytes_acked between
polls; a reused qp (bytes_acked went back) starts over; receiving halves are not transfers;
a connection stays listed FINISHED_KEPT_S after its counters stop, then goes; the testbed's
cuts mark links even where the controller does not track them; a collective job groups its
ranks' connections (by host and QP), sums their goodput and histories, and is shown until
JOB_KEPT_S after it ended."""

from __future__ import annotations

from collective.job import JobSpec
from collective.plans import Collective
from testbed.jobs import JobBoard
from testbed.live.state import FINISHED_KEPT_S, JOB_KEPT_S, LiveState
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


def test_a_job_groups_its_ranks_connections_and_sums_their_goodput():
    state, clock = _state()
    board = JobBoard(clock)
    job = board.begin(JobSpec(Collective.ALLREDUCE, 4096, iterations=3), ["h1", "h2"])
    board.connected(job, [[7, 8], [9]])
    board.iteration(job, {"iteration": 0, "time_s": 0.25, "algbw_Bps": 1.0, "busbw_Bps": 1.0})
    state.apply_agent("h1", {"connections": [sending_connection(7, 0), sending_connection(5, 0)]})
    clock.now += 1
    state.apply_agent("h1", {"connections": [sending_connection(7, 1_000_000)]})
    state.apply_agent("h2", {"connections": [sending_connection(9, 0)]})  # a poll later
    clock.now += 1
    state.apply_agent("h1", {"connections": [sending_connection(7, 1_500_000)]})
    state.apply_agent("h2", {"connections": [sending_connection(9, 1_000_000)]})
    state.set_jobs(board.snapshot())
    update = state.update_json()
    (shown,) = update["jobs"]
    assert shown["connections"] == ["h1/7", "h2/9"], "qp 5 is not the job's, qp 8 never sent"
    assert shown["completed"] == 1 and shown["records"][0]["time_s"] == 0.25
    assert shown["history"] == [8e6, 4e6 + 8e6]  # aligned on the newest poll
    assert shown["goodput_bps"] == 4e6 + 8e6 and shown["bytes_acked"] == 2_500_000
    assert {c["key"] for c in update["connections"]} == {"h1/5", "h1/7", "h2/9"}


def test_an_ended_job_is_shown_for_a_while_then_not():
    state, clock = _state()
    board = JobBoard(clock)
    job = board.begin(JobSpec(Collective.ALLGATHER, 4096), ["h1", "h2"])
    board.fail(job, "no agent runs on ['h9']")
    state.set_jobs(board.snapshot())
    (shown,) = state.update_json()["jobs"]
    assert shown["state"] == "failed" and shown["error"] == "no agent runs on ['h9']"
    assert shown["connections"] == [] and shown["goodput_bps"] == 0
    clock.now += JOB_KEPT_S
    state.set_jobs(board.snapshot())
    assert state.update_json()["jobs"] == []
