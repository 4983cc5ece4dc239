"""The live page of a real testbed run (Mininet, controller, agents) in headless Chromium:
the page shows the fabric; the Fail button cuts a link and the page draws it down within 2 s,
Restore brings it back; a transfer started from the page shows its goodput and EV grid, and
hovering an EV draws its path from sender to receiver; the Restart button is there only where
the target can restart a switch. With a single EV, the path the page draws is the one the
transfer's packets load, link by link, in their direction: the switches' own answer (the
kernel's route lookup, BMv2's tables and selector hash) is checked against their forwarding.
The page is driven by ``tools.live_page``; its cut during a transfer is the scene of the
README's figure, which ``make live-screenshot`` takes (the tests write no figure).

Needs root and Mininet (and BMv2 for the bmv2 target): skips with the reason otherwise.
Heavy: run it under `flock /tmp/mrc-heavy.lock` on a shared machine.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="aiohttp not installed (make setup)")

from tests.e2e.mininet.environment import TARGETS, forwarding_skip_reason
from tests.e2e.testbed.topology_files import preset_on_own_ports
from tools.live_page import (
    ACTION_ANSWERED_MS,
    SHOWN_WITHIN_MS,
    VIEWPORT,
    answered,
    cut_during_a_transfer,
    hover_path,
    load,
    start_transfer,
    state_is,
    tap,
)

SPINE_LINK = "l1:3<->s1:1"
OTHER_LINK = "l2:4<->s2:2"
#: A restored link is up once the controller has seen it (LLDP probes on bmv2).
BACK_UP_WITHIN_MS = 30_000
#: The one-EV transfer's length: it must still be sending when the checks end.
SINGLE_EV_TRANSFER_S = 30


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> str:
    reason = forwarding_skip_reason(str(request.param))
    if reason:
        pytest.skip(reason)
    return str(request.param)


@pytest.fixture
def runs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from testbed.mininet.cleanup import sweep
    from testbed.mininet.naming import RUN_PREFIX_PATTERN
    from testbed.mininet.runs import RUNS_ROOT_ENV

    path = tmp_path / "runs"
    path.mkdir()
    monkeypatch.setenv(RUNS_ROOT_ENV, str(path))
    yield path
    for run in path.iterdir():
        if RUN_PREFIX_PATTERN.match(run.name):
            sweep(run.name)


def _dump_tables(testbed, switch: str) -> str:
    from testbed.bmv2 import thrift_cli
    from testbed.live.paths import dump_commands

    return thrift_cli(dump_commands(), testbed.topology.switch(switch).thrift_port)


def test_the_page_drives_and_shows_a_running_testbed(browser, target, runs_dir, tmp_path):
    from testbed.live import live_view
    from testbed.session import Testbed

    topology_file = preset_on_own_ports("leaf-spine", tmp_path, grpc_base=50850, thrift_base=9890)
    lines: list[str] = []
    with (
        Testbed.open(str(topology_file), target) as testbed,
        live_view(testbed, port=0, say=lines.append) as server,
    ):
        assert server is not None, lines
        page = browser.new_page(viewport=VIEWPORT)
        try:
            load(page, server.url)
            nodes = page.evaluate("window.liveView.cy.nodes().length")
            edges = page.evaluate("window.liveView.cy.edges().length")
            state_is(page, SPINE_LINK, "up", BACK_UP_WITHIN_MS)

            tap(page, "s1")
            restart_buttons = page.locator("#button-restart").count()

            tap(page, SPINE_LINK)
            page.click("#button-fail")
            state_is(page, SPINE_LINK, "down", SHOWN_WITHIN_MS)
            page.click("#button-restore")
            answered(page, "restored", ACTION_ANSWERED_MS)
            state_is(page, SPINE_LINK, "up", BACK_UP_WITHIN_MS)

            hovered = cut_during_a_transfer(page, OTHER_LINK)
            cells = page.locator(".transfer .evgrid .ev").count()
            heading = page.inner_text(".transfer h3")
            if not hovered["ok"] and target == "bmv2":  # what the switch held, for the report
                hovered["tables"] = _dump_tables(testbed, hovered["nodes"][-1])
            page.click("#button-restore")
            page.wait_for_function(
                "window.liveView.update.transfers.some(t => t.state !== 'running')",
                timeout=30_000,
            )
            transfer = page.evaluate("window.liveView.update.transfers[0]")
            page.mouse.move(5, 5)

            # One EV: every data packet takes its path, which must be the loaded one. Long
            # enough to outlast the checks below: a hover reads every switch on the path over
            # Thrift, several seconds each on a loaded machine.
            start_transfer(page, str(SINGLE_EV_TRANSFER_S), evs="1")
            # The key is taken when the connection is seen: later it may be idle for a moment
            # (a stall on the busy bmv2 path) and no longer count as active (moved within 2.5 s).
            key = page.wait_for_function(
                "window.liveView.update.transfers.length === 2"
                " && (window.liveView.update.connections.find("
                "c => c.active && c.evs.length === 1) || {}).key",
                timeout=20_000,
            ).json_value()
            page.wait_for_timeout(3500)  # two controller periods of load with the new transfer
            # Until the earlier transfer's tail has left the load window; hovered again each
            # time, since a loss retires the one EV and its stand-in may hash elsewhere.
            deadline = time.monotonic() + SINGLE_EV_TRANSFER_S - 5
            while True:
                single = hover_path(page, f'.evgrid .ev[data-key="{key}"]')
                links = page.evaluate("window.liveView.update.links")
                single_running = page.evaluate(
                    "window.liveView.update.transfers[0].state"  # newest first
                )
                if single["ok"] and _only_the_path_is_loaded(single, links):
                    break
                if time.monotonic() > deadline or single_running != "running":
                    break
                page.mouse.move(5, 5)
                page.wait_for_timeout(1000)
        finally:
            page.close()
    assert nodes == 6 + 4 and edges == 8 + 4
    assert restart_buttons == (0 if target == "linux" else 1)
    assert cells >= 256  # the agent's default EV set, stand-ins for retired EVs after it
    assert transfer["state"] == "done", transfer
    assert transfer["summary"]["goodput_bps"] > 0
    assert heading.startswith("h1 → h3 qp ")
    assert hovered["ok"], hovered
    assert hovered["nodes"][:2] == ["h1", "l1"] and hovered["nodes"][-2:] == ["l2", "h3"]

    assert single["ok"], single
    on_path, elsewhere = _path_and_other_loads(single, links)
    assert len(on_path) == 2 and min(on_path.values()) > 1e6, (single_running, single, links)
    # Other links carry acknowledgements at most (a small fraction of the data).
    assert max(elsewhere.values()) < min(on_path.values()) / 4, (single, links)


def _path_and_other_loads(single: dict, links: dict) -> tuple[dict[str, float], dict[str, float]]:
    """Fabric links on the hovered path with their load in the path's direction, and every
    other fabric link with its higher direction's load (host links: not counted everywhere)."""
    on_path = {}
    for hop in single["links"]:
        if hop["id"].startswith("h"):
            continue
        load = links.get(hop["id"], {})
        forward = load.get("ab_bps" if hop["id"].startswith(hop["from"] + "<->") else "ba_bps")
        on_path[hop["id"]] = forward or 0.0
    elsewhere = {
        link: max(load["ab_bps"] or 0.0, load["ba_bps"] or 0.0)
        for link, load in links.items()
        if not link.startswith("h") and link not in on_path
    }
    return on_path, elsewhere


def _only_the_path_is_loaded(single: dict, links: dict) -> bool:
    on_path, elsewhere = _path_and_other_loads(single, links)
    return (
        len(on_path) == 2
        and min(on_path.values()) > 1e6
        and max(elsewhere.values()) < min(on_path.values()) / 4
    )


def test_a_collective_job_shows_as_one_card_with_its_ranks_and_progress(
    browser, runs_dir, tmp_path
):
    """Four ranks on the linux target (fast to bring up); a second of compute per iteration,
    so that the page's once-a-second refresh sees the count move."""
    import threading

    from collective.job import JobSpec
    from collective.plans import Collective
    from testbed.live import live_view
    from testbed.session import Testbed

    reason = forwarding_skip_reason("linux")
    if reason:
        pytest.skip(reason)
    topology_file = preset_on_own_ports("leaf-spine", tmp_path, grpc_base=50850, thrift_base=9890)
    hosts = ["h1", "h2", "h3", "h4"]
    spec = JobSpec(Collective.ALLREDUCE, 256 * 1024, iterations=5, compute_s=1.0)
    lines: list[str] = []
    outcome: dict = {}
    with (
        Testbed.open(str(topology_file), "linux") as testbed,
        live_view(testbed, port=0, say=lines.append) as server,
    ):
        assert server is not None, lines
        page = browser.new_page(viewport=VIEWPORT)

        def run() -> None:
            try:
                outcome["result"] = testbed.collective(hosts, spec)
            except Exception as error:  # reported by the assertions below
                outcome["error"] = error

        job = threading.Thread(target=run, name="collective-job")
        try:
            load(page, server.url)
            job.start()
            page.wait_for_selector(".job[data-job]", timeout=30_000)
            first = page.wait_for_function(
                "(window.liveView.update.jobs.find(j => j.state === 'running'"
                " && j.completed >= 1) || {}).completed",
                timeout=60_000,
            ).json_value()
            later = page.wait_for_function(
                "(n) => (window.liveView.update.jobs.find(j => j.completed > n) || {}).completed",
                arg=first,
                timeout=60_000,
            ).json_value()
            ranks_text = page.inner_text(".job .ranks")
            iteration_text = page.inner_text(".job .iteration")
            page.wait_for_function(
                "window.liveView.update.jobs.some(j => j.state !== 'running')", timeout=90_000
            )
            ended = page.evaluate("window.liveView.update.jobs[0]")
            grids_in_job = page.locator(".job .transfer .evgrid").count()
            loose_cards = page.locator("#transfers > .transfer").count()
        finally:
            page.close()
            job.join(120)
    assert "error" not in outcome, outcome
    assert outcome["result"].ok
    assert ranks_text == "ranks 0:h1 1:h2 2:h3 3:h4"
    assert 1 <= first < later <= spec.iterations
    assert iteration_text.startswith("iteration ") and "busbw" in iteration_text
    assert ended["state"] == "done" and ended["completed"] == spec.iterations, ended
    assert ended["hosts"] == hosts and ended["ranks"] == 4
    assert ended["summary"]["busbw_Bps"] > 0
    # Each rank sends on at least one QP: its connections are in the job's card, not loose.
    assert len({key.split("/")[0] for key in ended["connections"]}) == 4, ended["connections"]
    assert grids_in_job == len(ended["connections"]) and loose_cards == 0
