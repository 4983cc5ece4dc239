"""The subscription's model: link states follow events at once and statuses on each period;
loads are per-direction counter differences between two statuses, from the sending switch's
tx or, from a host, the receiving switch's rx; a counter that went back gives no load."""

from __future__ import annotations

from controller.app.watch import (
    FabricWatch,
    describe_topology,
    format_event,
    format_period,
)
from topologies import load_topology

SPINE_LINK = "l1:3<->s1:1"
HOST_LINK = "h1:0<->l1:1"


def _ports(**ports: tuple[int, int]) -> dict:
    return {
        port: {"tx_bytes": tx, "rx_bytes": rx, "tx_packets": 0, "rx_packets": 0}
        for port, (tx, rx) in ports.items()
    }


def _status(uptime: float, counters: dict, links: list | None = None) -> dict:
    return {
        "kind": "status",
        "status": {
            "generation": 1,
            "uptime_s": uptime,
            "links": links or [],
            "counters": counters,
            "switches": {},
        },
    }


def _watching() -> FabricWatch:
    watch = FabricWatch()
    topology = describe_topology(load_topology("leaf-spine"))
    assert watch.apply({"ok": True, "kind": "subscribed", "period_s": 1.0, "topology": topology})
    return watch


def test_the_description_names_every_switch_host_and_link_as_the_status_does():
    topology = load_topology("leaf-spine")
    described = describe_topology(topology)
    assert [s["name"] for s in described["switches"]] == ["l1", "l2", "s1", "s2", "s3", "s4"]
    assert {s["tier"] for s in described["switches"]} == {0, 1}
    assert len(described["links"]) == len(topology.links) + len(topology.hosts)
    ids = {link["id"] for link in described["links"]}
    assert SPINE_LINK in ids and HOST_LINK in ids
    kinds = {link["id"]: link["kind"] for link in described["links"]}
    assert kinds[SPINE_LINK] == "fabric" and kinds[HOST_LINK] == "host"


def test_link_state_follows_events_and_statuses():
    watch = _watching()
    assert watch.links[SPINE_LINK]["state"] == "untracked"
    watch.apply(_status(1.0, {}, [{"link": SPINE_LINK, "state": "up", "changed_at": None}]))
    assert watch.links[SPINE_LINK]["state"] == "up"
    watch.apply({"kind": "event", "event": {"event": "link_down", "link": SPINE_LINK, "ts": "T"}})
    assert watch.links[SPINE_LINK] | {} == {
        "state": "down",
        "changed_at": "T",
        "ab_bps": None,
        "ba_bps": None,
    }
    assert watch.down_links() == [SPINE_LINK]
    assert watch.events[-1]["event"] == "link_down"
    watch.apply({"kind": "event", "event": {"event": "link_up", "link": SPINE_LINK, "ts": "U"}})
    assert watch.down_links() == []


def test_loads_are_counter_differences_per_direction():
    watch = _watching()
    watch.apply(_status(10.0, {"l1": {"ports": _ports(**{"3": (1000, 0), "1": (0, 0)})}}))
    assert watch.links[SPINE_LINK]["ab_bps"] is None  # one status: no difference yet
    s1 = {"ports": _ports(**{"1": (500, 0)})}
    watch.apply(_status(10.5, {"l1": {"ports": _ports(**{"3": (2000, 0), "1": (0, 250)})}}))
    link = watch.links[SPINE_LINK]
    assert link["ab_bps"] == 1000 * 8 / 0.5  # l1 port 3 sent 1000 B in 0.5 s
    assert link["ba_bps"] == 0  # s1 has no counters here: l1's rx on port 3 did not move
    # the host sends: only l1's rx says so
    assert watch.links[HOST_LINK]["ab_bps"] == 250 * 8 / 0.5
    watch.apply(_status(11.5, {"l1": {"ports": _ports(**{"3": (2000, 100)})}, "s1": s1}))
    assert watch.links[SPINE_LINK]["ab_bps"] == 0
    assert watch.links[SPINE_LINK]["ba_bps"] == 100 * 8 / 1.0  # from l1's rx (s1 new)


def test_a_counter_that_went_back_gives_no_load():
    watch = _watching()
    watch.apply(_status(1.0, {"l1": {"ports": _ports(**{"3": (5000, 0)})}}))
    watch.apply(_status(2.0, {"l1": {"ports": _ports(**{"3": (10, 0)})}}))
    assert watch.links[SPINE_LINK]["ab_bps"] is None


def test_unknown_and_malformed_messages_change_nothing():
    watch = _watching()
    before = {k: dict(v) for k, v in watch.links.items()}
    assert watch.apply({"kind": "future"}) == "future"
    assert watch.apply({"kind": "status", "status": "nope"}) == "status"
    assert watch.apply({"kind": "event", "event": None}) == "event"
    assert watch.apply({"kind": "status", "status": {"uptime_s": "x", "counters": []}})
    assert watch.links == before
    watch.apply({"kind": "status_error", "error": "status failed: boom"})
    assert watch.to_json()["status_error"] == "status failed: boom"


def test_the_terminal_lines():
    watch = _watching()
    watch.apply(_status(1.0, {"l1": {"ports": _ports(**{"3": (0, 0)})}}))
    watch.apply(_status(2.0, {"l1": {"ports": _ports(**{"3": (1_000_000, 0)})}}))
    watch.apply({"kind": "event", "event": {"event": "link_down", "link": SPINE_LINK, "ts": "T"}})
    line = format_period(watch)
    assert f"down: {SPINE_LINK}" in line
    assert "l1:3->s1:1 8.00 Mb/s" in line
    event = format_event(
        {"ts": "2026-01-02T03:04:05.678901+00:00", "mono": 1, "event": "link_up", "link": "x"}
    )
    assert event == "03:04:05.678 link_up link=x"
