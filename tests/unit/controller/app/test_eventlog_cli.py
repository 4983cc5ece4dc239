"""The JSON-lines event log, the command line's error handling, and the P4Runtime southbound's
promise never to raise for a switch it cannot reach."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import datetime

import pytest

from controller.app.eventlog import EventLog
from controller.cli import EXIT_UNAVAILABLE, EXIT_USAGE, main
from controller.intent import compute_intent
from controller.southbound.interface import SouthboundError
from controller.southbound.p4runtime import P4RuntimeSouthbound, SwitchEndpoint, grpc_address
from tests.unit.controller.fakes import FakeClock
from topologies import Endpoint, load_topology


def test_every_event_is_one_json_line_with_wall_and_monotonic_time():
    stream = io.StringIO()
    clock = FakeClock(start=12.5)
    log = EventLog(stream, clock)
    log.emit("link_down", link="l1:3<->s1:1", since_ms=31.2)
    log.emit("unlisted_link", sender=Endpoint("l1", 3))
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["event"] == "link_down" and first["since_ms"] == 31.2
    assert first["mono"] == 12.5
    assert datetime.fromisoformat(first["ts"]).timestamp() == pytest.approx(clock.wall())
    assert second["sender"] == "l1:3"  # values JSON cannot hold are written as str()


def test_an_event_log_file_is_appended_to(tmp_path):
    path = tmp_path / "logs" / "events.jsonl"
    for word in ("one", "two"):
        log = EventLog.open(path)
        log.emit(word)
        log.close()
    assert [json.loads(line)["event"] for line in path.read_text().splitlines()] == [
        "one",
        "two",
    ]


def test_run_with_an_unknown_topology_fails_before_touching_a_switch(capsys):
    assert main(["run", "/nonexistent/topo.yaml"]) == EXIT_USAGE
    assert "cannot read the file" in capsys.readouterr().err


def test_run_with_a_cpu_port_the_program_was_not_compiled_for_is_refused(tmp_path, capsys):
    topology = tmp_path / "odd.yaml"
    topology.write_text(
        "settings: {cpu_port: 200}\n"
        "switches: [{name: l1, role: leaf, device_id: 1}]\n"
        "hosts: [{name: h1, nics: [{switch: l1, port: 1}]}]\n"
    )
    assert main(["run", str(topology), "--no-queues"]) == EXIT_USAGE
    assert "cpu_port 200 differs" in capsys.readouterr().err


def test_run_with_a_bad_config_file_names_it(tmp_path, capsys):
    config = tmp_path / "ctl.yaml"
    config.write_text("electionid: 3\n")
    assert main(["run", "leaf-spine", "--config", str(config)]) == EXIT_USAGE
    assert "unknown keys: electionid" in capsys.readouterr().err


def test_status_without_a_running_controller_says_so(tmp_path, capsys):
    assert main(["status", "--socket", str(tmp_path / "none.sock")]) == EXIT_UNAVAILABLE
    assert "no controller is listening" in capsys.readouterr().err


def test_grpc_addresses_bracket_ipv6_literals():
    assert grpc_address("127.0.0.1", 50051) == "127.0.0.1:50051"
    assert grpc_address("fd00::1", 50051) == "[fd00::1]:50051"
    assert grpc_address("[fd00::1]", 50051) == "[fd00::1]:50051"


def test_the_p4runtime_southbound_reports_an_unreachable_switch_instead_of_raising():
    intent = compute_intent(load_topology("leaf-spine")).switch("l1")
    southbound = P4RuntimeSouthbound([SwitchEndpoint("l1", "127.0.0.1:1", 1)])

    async def attempt():
        result = await southbound.program(intent, read_back=True)
        unknown = await southbound.program(compute_intent(load_topology("leaf-spine")).switch("s1"))
        sent = await southbound.send_frames("l1", [(3, b"x" * 60)])
        with pytest.raises(SouthboundError, match="channel down"):
            await southbound.read_counters("l1", [1], [0])
        return result, unknown, sent

    result, unknown, sent = asyncio.run(attempt())
    assert not result.ok and result.error == "channel down" and not result.ours
    assert unknown.error == "unknown switch 's1'"
    assert sent == 0


def test_the_finsy_reconnect_throttle_the_southbound_shortens_still_exists():
    import finsy.switch

    assert isinstance(finsy.switch._FAIL_THROTTLE_SECS, int | float)
