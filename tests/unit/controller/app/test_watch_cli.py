"""``mrc-controller watch``: notable events as lines as they come, a link line per status,
every event with ``--all``, the raw stream with ``--json``; exit 3 when no controller answers."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

from controller.app.watch import describe_topology
from controller.cli import main
from topologies import load_topology

LINK = "l1:3<->s1:1"


def _stream(path: Path, lines: list[dict]) -> threading.Thread:
    """A controller stand-in: takes one subscription, sends ``lines``, hangs up."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def serve() -> None:
        with server:
            connection, _ = server.accept()
            with connection:
                request = json.loads(connection.makefile("rb").readline())
                assert request["command"] == "subscribe"
                for line in lines:
                    connection.sendall(json.dumps(line).encode() + b"\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def _lines() -> list[dict]:
    status = {
        "generation": 4,
        "uptime_s": 1.0,
        "links": [{"link": LINK, "state": "down", "changed_at": None}],
        "counters": {},
    }
    event = {"ts": "2026-01-02T03:04:05.000001+00:00", "mono": 1.0, "event": "link_down"}
    program = {"ts": "2026-01-02T03:04:05.100001+00:00", "mono": 1.1, "event": "program"}
    topology = describe_topology(load_topology("leaf-spine"))
    return [
        {"ok": True, "kind": "subscribed", "period_s": 1.0, "topology": topology},
        {"kind": "event", "event": {**event, "link": LINK}},
        {"kind": "event", "event": {**program, "switch": "l1"}},
        {"kind": "status", "status": status},
    ]


def test_watch_prints_notable_events_and_a_line_per_status(tmp_path, capsys):
    path = tmp_path / "ctl.sock"
    thread = _stream(path, _lines())
    assert main(["watch", "--socket", str(path)]) == 0
    thread.join(10)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"03:04:05.000 link_down link={LINK}"
    assert out[1].startswith("generation 4  links:") and f"down: {LINK}" in out[1]
    assert len(out) == 2  # the program event is not notable


def test_watch_all_and_json(tmp_path, capsys):
    path = tmp_path / "a.sock"
    thread = _stream(path, _lines())
    assert main(["watch", "--socket", str(path), "--all"]) == 0
    thread.join(10)
    assert "program switch=l1" in capsys.readouterr().out
    path = tmp_path / "j.sock"
    thread = _stream(path, _lines())
    assert main(["watch", "--socket", str(path), "--json"]) == 0
    thread.join(10)
    kinds = [json.loads(line)["kind"] for line in capsys.readouterr().out.splitlines()]
    assert kinds == ["subscribed", "event", "event", "status"]


def test_watch_without_a_controller_is_exit_3(tmp_path, capsys):
    assert main(["watch", "--socket", str(tmp_path / "none.sock")]) == 3
    assert "no controller" in capsys.readouterr().err
