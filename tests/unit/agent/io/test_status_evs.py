"""The control socket's ``status`` asks for per-EV tables only when told (``"evs": true``):
the tables are large, and a plain ``status`` stays as small as it was."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from agent.core import ConnectionSpec, EvReport, MrcConfig
from agent.io.control_protocol import StatusRequest, parse_request
from agent.io.control_server import ControlServer, ControlSession
from agent.io.errors import ProtocolError
from agent.io.runtime import AgentRuntime
from agent.io.stats_json import ev_report_to_json
from tests.unit.agent.io.memory_link import PLANE_A, PLANE_B, memory_link
from wire.constants import EvState


def test_status_with_and_without_ev_tables_round_trips():
    assert parse_request(StatusRequest().to_json(1)) == StatusRequest(evs=False)
    assert StatusRequest().to_json(1) == {"id": 1, "op": "status"}
    assert parse_request(StatusRequest(evs=True).to_json(2)) == StatusRequest(evs=True)


@pytest.mark.parametrize("value", [1, "yes", None, [True]])
def test_evs_must_be_a_boolean(value):
    with pytest.raises(ProtocolError, match="'evs'"):
        parse_request({"id": 1, "op": "status", "evs": value})


def test_an_ev_row_carries_its_trims_and_ecn_echoes():
    row = ev_report_to_json(EvReport(0, 0x12340005, EvState.SKIP, True, 9, 1, 2, 3))
    assert row["state"] == "SKIP" and row["losses"] == 1
    assert (row["trims"], row["ecn_echoes"]) == (2, 3)


def test_status_names_each_connections_peer_by_its_plane_addresses(tmp_path: Path):
    link, _ = memory_link()
    runtime = AgentRuntime([PLANE_A], MrcConfig(), datagram_io=link)
    server = ControlServer(runtime, str(tmp_path / "agent.sock"))
    ours, theirs = socket.socketpair()
    try:
        pool = runtime.pool
        qp = pool.allocate_qp(pool.default)
        pool.connect(pool.default, ConnectionSpec(qp, 7, (PLANE_B,)))
        session = ControlSession(server, ours)
        (connection,) = session.status()["connections"]
        assert connection["qp"] == qp
        assert connection["remote_addresses"] == ["10.0.0.2"]
    finally:
        theirs.close()
        server.close()
        runtime.close()
