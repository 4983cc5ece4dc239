"""The live page in a real browser, on a fabric of real sockets without Mininet
(``tests/unit/testbed/live/fake_sources.py``): every shipped preset and a k=8 fat-tree load
with the right nodes and links; a cut link is drawn down within 2 s of the click and up again
after ``restore``; a sending connection shows its EV grid with every state, is named by the
host it sends to, and hovering an EV draws the path the switches say it takes; a collective
job is one card with its progress and its ranks' connections, a failed one shows its error;
the header names each controller's role, with a restart button beside a dead one."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="aiohttp not installed (make setup)")

from collective.job import JobSpec
from collective.plans import Collective
from testbed.jobs import JobBoard
from testbed.live.server import LiveServer
from tests.unit.testbed.live.fake_sources import (
    FakeActions,
    FakeFabric,
    FakeNextHops,
    sending_connection,
)
from tools.live_page import tap
from topologies.document import dump_document
from topologies.generator import fat_tree
from topologies.loader import load_topology_text
from topologies.presets import PRESETS

SPINE_LINK = "l1:3<->s1:1"
#: The page's promise: a cut shows within 2 s (the fake controller reports at once).
SHOWN_WITHIN_MS = 2000


@pytest.fixture
def short_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="live-", dir="/tmp"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _serving(fabric: FakeFabric, actions=None, next_hops=None) -> LiveServer:
    server = LiveServer(
        fabric.topology,
        fabric.controller_socket,
        fabric.agent_sockets,
        actions,
        port=0,
        next_hops=next_hops,
    )
    server.start()
    return server


def _graph(page) -> dict:
    page.wait_for_function("window.liveView && window.liveView.updates > 0", timeout=15000)
    return page.evaluate(
        """() => ({
            nodes: window.liveView.cy.nodes().map(n => n.id()),
            edges: window.liveView.cy.edges().map(e => [e.id(), e.data('state')]),
            inside: window.liveView.cy.nodes().every(n => {
                const box = n.renderedBoundingBox();
                const cy = window.liveView.cy;
                return box.x1 >= 0 && box.y1 >= 0 && box.x2 <= cy.width() && box.y2 <= cy.height();
            }),
        })"""
    )


TOPOLOGIES = [pytest.param(name, id=name) for name in PRESETS] + [
    pytest.param(
        load_topology_text(dump_document(fat_tree(8, name="fat-tree-k8"))), id="fat-tree-k8"
    )
]


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_the_page_shows_every_node_and_link(browser, short_dir, topology):
    with FakeFabric(topology, short_dir) as fabric:
        server = _serving(fabric)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        try:
            page.goto(server.url)
            graph = _graph(page)
        finally:
            page.close()
            server.stop()
    expected = fabric.topology
    assert sorted(graph["nodes"]) == sorted(
        [s.name for s in expected.switches] + [h.name for h in expected.hosts]
    )
    assert sorted(edge for edge, _ in graph["edges"]) == sorted(
        str(link.id) for link in expected.all_links
    )
    states = dict(graph["edges"])
    assert {states[link] for link in fabric.tracked} == {"up"}
    assert graph["inside"]  # the whole fabric fits the view at load


def test_fail_shows_the_link_down_within_two_seconds_and_restore_brings_it_back(browser, short_dir):
    with FakeFabric("leaf-spine", short_dir) as fabric:
        actions = FakeActions(fabric)
        server = _serving(fabric, actions)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        try:
            page.goto(server.url)
            _graph(page)
            # the controller's stream has begun: its events from here on reach the page
            page.wait_for_function(
                f"window.liveView.cy.getElementById('{SPINE_LINK}').data('state') === 'up'"
            )
            tap(page, SPINE_LINK)
            page.click("#button-fail")
            page.wait_for_function(
                f"window.liveView.cy.getElementById('{SPINE_LINK}').data('state') === 'down'",
                timeout=SHOWN_WITHIN_MS,
            )
            page.click("#button-restore")
            page.wait_for_function(
                f"window.liveView.cy.getElementById('{SPINE_LINK}').data('state') === 'up'",
                timeout=SHOWN_WITHIN_MS,
            )
            events = page.inner_text("#events")
        finally:
            page.close()
            server.stop()
    assert actions.calls == [("fail", SPINE_LINK), ("restore", SPINE_LINK)]
    assert "link_down" in events and "link_up" in events


def test_the_selection_buttons_stay_the_same_elements_while_updates_arrive(browser, short_dir):
    # A button replaced between a click's mousedown and mouseup loses the click: updates come
    # several a second, and most often right after an action.
    with FakeFabric("leaf-spine", short_dir) as fabric:
        server = _serving(fabric, FakeActions(fabric))
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        try:
            page.goto(server.url)
            _graph(page)
            tap(page, SPINE_LINK)
            seen = page.evaluate(
                "() => { document.getElementById('button-restore').marked = true;"
                " return window.liveView.updates; }"
            )
            page.wait_for_function(f"window.liveView.updates >= {seen + 2}", timeout=15000)
            kept = page.evaluate("document.getElementById('button-restore').marked === true")
            text = page.inner_text("#selected")
            tap(page, "s1")
            link_buttons_left = page.locator("#button-restore").count()
        finally:
            page.close()
            server.stop()
    assert kept
    assert text.startswith(f"link {SPINE_LINK}: up")
    assert link_buttons_left == 0  # another selection: the link's buttons are gone


def test_a_restart_button_only_where_the_target_can_restart(browser, short_dir):
    shown = {}
    for can_restart in (False, True):
        directory = short_dir / str(can_restart)
        directory.mkdir()
        with FakeFabric("leaf-spine", directory) as fabric:
            server = _serving(fabric, FakeActions(fabric, can_restart=can_restart))
            page = browser.new_page()
            try:
                page.goto(server.url)
                _graph(page)
                tap(page, "s1")
                shown[can_restart] = page.locator("#button-restart").count()
            finally:
                page.close()
                server.stop()
    assert shown == {False: 0, True: 1}


def test_the_header_names_the_primary_controller_and_restarts_a_dead_one(browser, short_dir):
    with FakeFabric("leaf-spine", short_dir) as fabric:
        actions = FakeActions(fabric)
        actions.stances = {"primary": "dead", "backup": "primary"}
        server = _serving(fabric, actions)
        page = browser.new_page()
        try:
            page.goto(server.url)
            page.wait_for_selector("#button-restart-primary", timeout=15000)
            acting = page.locator("#controller-backup").inner_text()
            page.click("#button-restart-primary")
            page.wait_for_function(
                "document.getElementById('controller-primary')?.textContent === 'primary: backup'",
                timeout=15000,
            )
            buttons_left = page.locator("#controllers button").count()
        finally:
            page.close()
            server.stop()
    assert acting == "backup: primary"
    assert ("controller_restart", "primary") in actions.calls
    assert buttons_left == 0


def test_a_sending_connection_shows_its_ev_grid(browser, short_dir):
    with FakeFabric("leaf-spine", short_dir) as fabric:
        fabric.connections["h1"] = [sending_connection(5, 10_000, evs=256)]
        server = _serving(fabric)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        try:
            page.goto(server.url)
            page.wait_for_selector(".evgrid .ev", timeout=15000)
            cells = page.locator(".evgrid .ev")
            count = cells.count()
            classes = [cells.nth(i).get_attribute("class") for i in range(4)]
            title = cells.nth(5).get_attribute("title")
        finally:
            page.close()
            server.stop()
    assert count == 256
    assert [c.split()[1] for c in classes] == ["s0", "s1", "s2", "s3"]
    assert "trims 1" in title


def test_a_collective_job_is_one_card_holding_its_connections_and_a_failed_one_its_error(
    browser, short_dir
):
    board = JobBoard()
    spec = JobSpec(Collective.ALLREDUCE, 4096, iterations=4)
    failed = board.begin(spec, ["h3", "h4"])
    board.fail(failed, "setting the job up failed: the agent refused")
    running = board.begin(spec, ["h1", "h2"])
    board.connected(running, [[5], [6]])
    board.iteration(
        running,
        {"iteration": 0, "time_s": 0.125, "algbw_Bps": 32768.0, "busbw_Bps": 32768.0},
    )
    with FakeFabric("leaf-spine", short_dir) as fabric:
        fabric.connections["h1"] = [sending_connection(5, 10_000), sending_connection(9, 10)]
        fabric.connections["h2"] = [sending_connection(6, 10_000)]
        server = LiveServer(
            fabric.topology,
            fabric.controller_socket,
            fabric.agent_sockets,
            None,
            port=0,
            jobs=board.snapshot,
        )
        server.start()
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        try:
            page.goto(server.url)
            page.wait_for_selector(f'.job[data-job="{running}"] .transfer', timeout=15000)
            job = page.locator(f'.job[data-job="{running}"]')
            heading = job.locator("h3").first.inner_text()
            iteration = job.locator(".iteration").inner_text()
            inside = sorted(
                job.locator(".transfer").nth(i).get_attribute("data-key")
                for i in range(job.locator(".transfer").count())
            )
            loose = [
                page.locator("#transfers > .transfer").nth(i).get_attribute("data-key")
                for i in range(page.locator("#transfers > .transfer").count())
            ]
            error = page.inner_text(f'.job[data-job="{failed}"] .job-error')
        finally:
            page.close()
            server.stop()
    assert heading == f"job {running}: allreduce of 4096 B over 2 ranks (mrc): running"
    assert iteration == ("iteration 1/4, last 0.1250 s, algbw 0.033 MB/s, busbw 0.033 MB/s")
    assert inside == ["h1/5", "h2/6"] and loose == ["h1/9"]
    assert error == "setting the job up failed: the agent refused"


def _hover_path(page, index: int) -> tuple[str, list[str], list[str]]:
    """Hover EV cell ``index``; the path text once answered, the highlighted edges and nodes."""
    page.hover(f".evgrid .ev >> nth={index}")
    page.wait_for_function(
        "!document.getElementById('ev-path').textContent.includes('asking')"
        " && document.getElementById('ev-path').textContent.startsWith('EV ')",
        timeout=15000,
    )
    text = page.inner_text("#ev-path")
    edges = page.evaluate("() => window.liveView.cy.edges('.path').map(e => e.id())")
    nodes = page.evaluate("() => window.liveView.cy.nodes('.path').map(n => n.id())")
    return text, sorted(edges), sorted(nodes)


def test_hovering_an_ev_draws_the_path_it_hashes_to(browser, short_dir):
    with FakeFabric("leaf-spine", short_dir) as fabric:
        fabric.connections["h1"] = [sending_connection(5, 10_000, evs=8, peer="10.0.2.2")]
        server = _serving(fabric, next_hops=FakeNextHops(fabric.topology))
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        try:
            page.goto(server.url)
            page.wait_for_selector(".evgrid .ev", timeout=15000)
            heading = page.inner_text(".transfer h3")
            first = _hover_path(page, 0)
            second = _hover_path(page, 1)
            page.mouse.move(5, 5)  # off the transfers: the path is cleared
            page.wait_for_function("window.liveView.cy.edges('.path').length === 0")
        finally:
            page.close()
            server.stop()
    assert heading.startswith("h1 → h4 qp 5")
    # sending_connection's EVs are source ports 49152, 49153, ...: spines s1 and s2 (modulo 4)
    for (text, edges, nodes), spine, port in ((first, "s1", 3), (second, "s2", 4)):
        assert text.endswith(f"h1 → l1 → {spine} → l2 → h4")
        assert edges == sorted(
            ["h1:0<->l1:1", f"l1:{port}<->{spine}:1", f"l2:{port}<->{spine}:2", "h4:0<->l2:2"]
        )
        assert nodes == sorted(["h1", "l1", spine, "l2", "h4"])


def test_an_ev_path_the_switches_cannot_tell_says_where_it_stops(browser, short_dir):
    with FakeFabric("leaf-spine", short_dir) as fabric:
        fabric.connections["h1"] = [sending_connection(5, 10_000, evs=8, peer="10.0.2.2")]
        hops = FakeNextHops(fabric.topology, blind=frozenset({"s1", "s2", "s3", "s4"}))
        server = _serving(fabric, next_hops=hops)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        try:
            page.goto(server.url)
            page.wait_for_selector(".evgrid .ev", timeout=15000)
            text, edges, _ = _hover_path(page, 0)
        finally:
            page.close()
            server.stop()
    assert text.endswith("h1 → l1 → s1, then path unknown (s1: its tables cannot be read)")
    assert edges == sorted(["h1:0<->l1:1", "l1:3<->s1:1"])
