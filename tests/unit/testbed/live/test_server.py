"""The live page's server against a fabric of real sockets (``fake_sources``): the layout
names every node and link; the update stream carries link state and load from the
controller's subscription, the transfers' EV tables from the agents and the testbed's
collective jobs with their connections; a cut reaches the stream as soon as the controller's
event does; buttons go through the actions and are refused where the target cannot; requests
from elsewhere than this server's own page are refused, and a token is required where one is
set."""

from __future__ import annotations

import http.client
import json
import shutil
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="aiohttp not installed (make setup)")

from collective.job import JobSpec
from collective.plans import Collective
from testbed.jobs import JobBoard
from testbed.live.server import LiveServer, LiveViewUnavailable, is_loopback
from tests.unit.testbed.live.fake_sources import (
    FakeActions,
    FakeFabric,
    FakeNextHops,
    sending_connection,
)
from topologies import load_topology

SPINE_LINK = "l1:3<->s1:1"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # Unix socket paths must stay short: pytest's tmp_path can be too long.
    directory = Path(tempfile.mkdtemp(prefix="live-", dir="/tmp"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def js_dir(short_dir: Path) -> Path:
    library = short_dir / "js" / "cytoscape" / "dist" / "cytoscape.min.js"
    library.parent.mkdir(parents=True)
    library.write_text("/* stand-in for the npm package */")
    return short_dir / "js"


def _server(fabric: FakeFabric, js_dir: Path, actions=None, **options) -> LiveServer:
    return LiveServer(
        fabric.topology,
        fabric.controller_socket,
        fabric.agent_sockets,
        actions,
        port=0,
        js_dir=js_dir,
        refresh_s=0.2,
        **options,
    )


def _request(server: LiveServer, method: str, path: str, body=None, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    payload = None if body is None else json.dumps(body).encode()
    sent = {"Content-Type": "application/json"} if body is not None else {}
    sent.update(headers or {})
    connection.request(method, path, body=payload, headers=sent)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data


def _updates(server: LiveServer, until: Callable[[dict], bool], path: str = "/api/events"):
    """Read the stream until ``until`` holds for an update (within a generous deadline)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    connection.request("GET", path)
    response = connection.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type") == "text/event-stream"
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            line = response.fp.readline()
            if line.startswith(b"data: "):
                update = json.loads(line[6:])
                if until(update):
                    return update
        raise AssertionError("no such update within 30 s")
    finally:
        connection.close()


def test_the_layout_names_every_node_and_link(short_dir, js_dir):
    with FakeFabric("leaf-spine", short_dir) as fabric:
        server = _server(fabric, js_dir)
        server.start()
        try:
            status, body = _request(server, "GET", "/api/layout")
            page_status, page = _request(server, "GET", "/")
            js_status, _ = _request(server, "GET", "/js/cytoscape.min.js")
            missing, _ = _request(server, "GET", "/js/other.js")
        finally:
            server.stop()
    layout = json.loads(body)
    topology = load_topology("leaf-spine")
    assert status == 200 and page_status == 200 and js_status == 200 and missing == 404
    assert b"cytoscape.min.js" in page
    assert {n["id"] for n in layout["nodes"]} == {s.name for s in topology.switches} | {
        h.name for h in topology.hosts
    }
    assert len(layout["links"]) == len(topology.all_links)
    assert layout["can_restart"] is False


def test_updates_carry_link_state_load_and_ev_tables(short_dir, js_dir):
    with FakeFabric("leaf-spine", short_dir) as fabric:
        fabric.connections["h1"] = [sending_connection(7, 1_000_000)]
        server = _server(fabric, js_dir)
        server.start()
        acked = [1_000_000]

        def sending_on(update: dict) -> bool:
            acked[0] += 1_000_000  # the agent's counters move between polls
            fabric.connections["h1"] = [sending_connection(7, acked[0])]
            return update["links"][SPINE_LINK]["ab_bps"] is not None and any(
                c["goodput_bps"] > 0 for c in update["connections"]
            )

        try:
            update = _updates(server, sending_on)
        finally:
            server.stop()
    link = update["links"][SPINE_LINK]
    assert link["state"] == "up" and link["cut"] is False
    assert link["ab_bps"] == pytest.approx(1e6)  # 125 kB per status second, from l1's tx
    (connection,) = update["connections"]
    assert (connection["host"], connection["qp"]) == ("h1", 7)
    assert len(connection["evs"]) == 64
    states = [row[0] for row in connection["evs"][:4]]
    assert states == [0, 1, 2, 3]  # GOOD, SKIP, ASSUMED_BAD, DENIED
    assert connection["evs"][5][2] == 1 and connection["evs"][6][3] == 1  # a trim, an echo
    assert update["agents"]["h1"]["ok"] is True


def test_a_collective_job_on_the_board_reaches_the_stream_with_its_connections(short_dir, js_dir):
    with FakeFabric("leaf-spine", short_dir) as fabric:
        fabric.connections["h1"] = [sending_connection(7, 1000), sending_connection(8, 1000)]
        board = JobBoard()
        job = board.begin(JobSpec(Collective.ALLREDUCE, 4096, iterations=5), ["h1", "h3"])
        board.connected(job, [[7], [2]])
        server = _server(fabric, js_dir, jobs=board.snapshot)
        server.start()

        def two_iterations(update: dict) -> bool:
            if len(board.snapshot()[0]["records"]) < 2:  # the job reports as it goes
                board.iteration(job, {"iteration": 0, "time_s": 0.1})
            return any(j["completed"] == 2 for j in update["jobs"])

        try:
            update = _updates(server, two_iterations)
        finally:
            server.stop()
    (shown,) = update["jobs"]
    assert shown["hosts"] == ["h1", "h3"] and shown["state"] == "running"
    assert shown["connections"] == ["h1/7"]
    assert {c["key"] for c in update["connections"]} == {"h1/7", "h1/8"}


def test_a_transfer_names_its_peer_and_each_ev_its_path(short_dir, js_dir):
    with FakeFabric("leaf-spine", short_dir) as fabric:
        fabric.connections["h1"] = [sending_connection(7, 1000, evs=8, peer="10.0.2.2")]
        hops = FakeNextHops(fabric.topology)
        server = _server(fabric, js_dir, next_hops=hops)
        server.start()
        try:
            update = _updates(server, lambda u: bool(u["connections"]))
            ev = update["connections"][0]["evs"][1][6]
            status, body = _request(server, "GET", f"/api/path?host=h1&qp=7&ev={ev}")
            missing, gone = _request(server, "GET", f"/api/path?host=h1&qp=8&ev={ev}")
            foreign, stranger = _request(server, "GET", "/api/path?host=h1&qp=7&ev=5")
            bad, _ = _request(server, "GET", "/api/path?host=h1&qp=x&ev=1")
        finally:
            server.stop()
    assert update["connections"][0]["peer"] == "h4"
    path = json.loads(body)
    assert status == 200 and path["ok"] is True
    spine = ("s1", "s2", "s3", "s4")[(ev >> 16) % 4]  # FakeNextHops: source port modulo 4
    assert path["nodes"] == ["h1", "l1", spine, "l2", "h4"]
    uplink = f"l1:{int(spine[1]) + 2}"  # l1's ports 3 to 6 go to s1 to s4
    assert [link["from"] for link in path["links"]] == ["h1:0", uplink, f"{spine}:2", "l2:2"]
    assert missing == 404 and "no transfer h1/8" in json.loads(gone)["error"]
    assert foreign == 404 and "not in the EV set" in json.loads(stranger)["error"]
    assert bad == 400


def test_without_switches_to_ask_a_path_is_refused(short_dir, js_dir):
    with FakeFabric("leaf-spine", short_dir) as fabric:
        fabric.connections["h1"] = [sending_connection(7, 1000, evs=8, peer="10.0.2.2")]
        server = _server(fabric, js_dir)
        server.start()
        try:
            _updates(server, lambda u: bool(u["connections"]))
            status, body = _request(server, "GET", "/api/path?host=h1&qp=7&ev=1")
        finally:
            server.stop()
    assert status == 409 and "no switches to ask" in json.loads(body)["error"]


def test_fail_and_restore_reach_the_stream_through_the_actions(short_dir, js_dir):
    with FakeFabric("leaf-spine", short_dir) as fabric:
        actions = FakeActions(fabric)
        server = _server(fabric, js_dir, actions)
        server.start()
        try:
            # subscribed first: an event published before the subscription is not in its stream
            _updates(server, lambda u: u["links"][SPINE_LINK]["state"] == "up")
            status, body = _request(server, "POST", "/api/fail", {"a": "l1", "b": "s1"})
            assert status == 200 and json.loads(body)["message"] == f"cut {SPINE_LINK}"
            down = _updates(server, lambda u: u["links"][SPINE_LINK]["state"] == "down")
            status, _ = _request(server, "POST", "/api/restore", {"a": "l1", "b": "s1"})
            assert status == 200
            up = _updates(server, lambda u: u["links"][SPINE_LINK]["state"] == "up")
        finally:
            server.stop()
    assert down["links"][SPINE_LINK]["cut"] is True
    assert up["links"][SPINE_LINK]["cut"] is False
    assert any(e["event"] == "link_down" for e in up["events"])
    assert actions.calls == [("fail", SPINE_LINK), ("restore", SPINE_LINK)]


def test_a_transfer_from_the_page_is_started_and_reported(short_dir, js_dir):
    with FakeFabric("leaf-spine", short_dir) as fabric:
        actions = FakeActions(fabric)
        server = _server(fabric, js_dir, actions)
        server.start()
        try:
            status, body = _request(
                server, "POST", "/api/transfer", {"source": "h1", "destination": "h3", "evs": 8}
            )
            update = _updates(
                server, lambda u: bool(u["transfers"]) and u["transfers"][0]["state"] == "done"
            )
        finally:
            server.stop()
    assert status == 200 and "h1 -> h3" in json.loads(body)["message"]
    assert update["transfers"][0]["summary"]["goodput_bps"] == 8e6
    assert actions.calls == [("transfer", "h1", "h3")]


@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        ("/api/restart", {"switch": "s1"}, "no switch process"),
        ("/api/fail", {"a": "l1", "b": "nowhere"}, "no node"),
        ("/api/fail", {"a": 3, "b": "s1"}, "must be a name"),
        ("/api/transfer", {"source": "h1", "destination": "h1"}, "two different hosts"),
        ("/api/transfer", {"source": "h1", "destination": "h2", "bytes": -1}, "'bytes'"),
        ("/api/reboot", {}, "unknown operation"),
    ],
)
def test_requests_the_target_cannot_do_are_refused(short_dir, js_dir, path, body, error):
    with FakeFabric("leaf-spine", short_dir) as fabric:
        actions = FakeActions(fabric, can_restart=False)
        server = _server(fabric, js_dir, actions)
        server.start()
        try:
            status, answer = _request(server, "POST", path, body)
        finally:
            server.stop()
    assert status == 400 and error in json.loads(answer)["error"]
    assert actions.calls == []


def test_requests_not_from_this_servers_page_are_refused(short_dir, js_dir):
    with FakeFabric("leaf-spine", short_dir) as fabric:
        actions = FakeActions(fabric)
        server = _server(fabric, js_dir, actions)
        server.start()
        try:
            rebound, _ = _request(server, "GET", "/api/layout", headers={"Host": "evil.example"})
            cross, _ = _request(
                server,
                "POST",
                "/api/fail",
                {"a": "l1", "b": "s1"},
                headers={"Origin": "http://evil.example"},
            )
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            connection.request(
                "POST", "/api/fail", body="a=l1&b=s1",
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )  # fmt: skip
            form = connection.getresponse().status
            connection.close()
        finally:
            server.stop()
    assert (rebound, cross, form) == (403, 403, 403)
    assert actions.calls == []


def test_a_token_is_required_where_one_is_set(short_dir, js_dir):
    with FakeFabric("leaf-spine", short_dir) as fabric:
        server = _server(fabric, js_dir, token="s3cret")
        server.start()
        try:
            without, _ = _request(server, "GET", "/api/layout")
            wrong, _ = _request(server, "GET", "/api/layout?token=guess")
            right, _ = _request(server, "GET", "/api/layout?token=s3cret")
            header, _ = _request(server, "GET", "/api/layout", headers={"X-Live-Token": "s3cret"})
        finally:
            server.stop()
    assert (without, wrong, right, header) == (403, 403, 200, 200)
    assert urllib.parse.urlparse(server.url).query == "token=s3cret"


def test_listening_beyond_loopback_makes_a_token():
    topology = load_topology("leaf-spine")
    server = LiveServer(topology, Path("/nonexistent"), {}, None, host="0.0.0.0")
    assert server.token and f"token={server.token}" in server.url
    local = LiveServer(topology, Path("/nonexistent"), {}, None, host="127.0.0.1")
    assert local.token is None
    assert is_loopback("::1") and is_loopback("localhost") and not is_loopback("10.0.0.1")


def test_without_the_javascript_the_view_says_how_to_get_it(tmp_path):
    server = LiveServer(load_topology("leaf-spine"), tmp_path / "c", {}, None, js_dir=tmp_path)
    with pytest.raises(LiveViewUnavailable, match="make setup"):
        server.start()


def test_without_a_controller_the_stream_says_so(short_dir, js_dir):
    topology = load_topology("leaf-spine")
    server = LiveServer(topology, short_dir / "none.sock", {}, None, port=0, js_dir=js_dir)
    server.start()
    try:
        update = _updates(server, lambda u: "no controller" in (u["controller"]["error"] or ""))
    finally:
        server.stop()
    assert update["links"][SPINE_LINK]["state"] == "untracked"
