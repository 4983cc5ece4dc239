"""``mrc-agent ctl``: every controller subcommand against a running agent (in a thread of
this process, on an in-memory link with no peer), JSON out, errors as exit codes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.api.service import ApiService
from agent.cli import agent_main
from agent.core import MrcConfig
from agent.io.control_server import ControlServer
from agent.io.runtime import AgentRuntime
from tests.unit.agent.io.memory_link import PLANE_A, memory_link


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[tuple[str, ControlServer]]:
    link, _unused = memory_link()
    runtime = AgentRuntime([PLANE_A], MrcConfig(), datagram_io=link, seed=1)
    path = str(tmp_path / "agent.sock")
    server = ControlServer(runtime, path)
    ApiService(runtime).install(server)
    stop = threading.Event()
    thread = threading.Thread(target=lambda: runtime.run(stop.is_set), daemon=True)
    thread.start()
    yield path, server
    stop.set()
    thread.join(timeout=10)
    runtime.close()


def _ctl(capsys, path: str, *args: str) -> tuple[int, object]:
    code = agent_main.main(["ctl", *args, "--socket", path])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 and out.out.strip() else out.err)


def test_an_explicit_profile_configured_from_the_command_line(agent, capsys):
    path, _server = agent
    code, device = _ctl(capsys, path, "device")
    assert code == 0 and device["phy_port_mask"] == 2
    assert _ctl(capsys, path, "ev", "fmt", "set", "13", "--state", "offline", "--mode", "stev",
                "--fields", "16,16")[0] == 0  # fmt: skip
    assert _ctl(capsys, path, "ev", "fmt", "set", "13", "--state", "online")[0] == 0
    fields = '[{"width": 16, "mask": "0xffff"}, {"width": 16, "mask": "0xffff"}]'
    code, profile = _ctl(capsys, path, "ev", "profile", "set", "1", "--state", "offline",
                         "--mode", "exp", "--fmt", "13", "--count", "2",
                         "--event-mask", "good,assumed_bad", "--fields", fields)  # fmt: skip
    assert code == 0 and profile["ev_event_mask"] == 3
    assert _ctl(capsys, path, "ev", "populate", "1", "0xc0010001", "0xc0020002@1")[0] == 0
    assert _ctl(capsys, path, "ev", "replace", "1", "0xc0020002", "0xc0030003")[0] == 0
    code, profile = _ctl(capsys, path, "ev", "profile", "set", "1", "--state", "online")
    assert code == 0 and profile["cur_profile_state"] == "ONLINE"
    code, shown = _ctl(capsys, path, "ev", "profile", "show", "1", "--array")
    assert [e["val"] for e in shown["evs"]] == ["0xc0010001", "0xc0030003"]
    code, states = _ctl(capsys, path, "ev", "state", "1", "0xc0010001", "--set", "denied")
    assert code == 0 and states["evs"][0]["state"] == "DENIED"
    code, error = _ctl(capsys, path, "ev", "state", "1", "0xc0990000", "--set", "denied")
    assert code == 2 and "ev_op.entries[0].ev" in error and "ENOENT" in error


def test_cc_ports_and_probes(agent, capsys):
    path, _server = agent
    assert _ctl(capsys, path, "cc", "set", "3", "--state", "offline", "--algorithm",
                "uet-1.0-nscc")[0] == 0  # fmt: skip
    code, cc = _ctl(capsys, path, "cc", "set", "3", "--state", "online",
                    "--config", '{"target_delay": 50000}')  # fmt: skip
    assert code == 0 and cc["cc_config"] == {"target_delay": 50000}
    code, error = _ctl(capsys, path, "cc", "set", "4", "--state", "offline", "--algorithm", "x")
    assert code == 2 and "algorithm" in error
    code, port = _ctl(capsys, path, "port", "set", "1", "--admin", "disabled")
    assert code == 0 and port["state"] == "DOWN"
    code, port = _ctl(capsys, path, "port", "set", "1", "--admin", "enabled")
    assert port["state"] == "ACTIVE"
    # No peer answers on this link: the probe times out.
    code, probes = _ctl(capsys, path, "ev", "probe", "--to", "10.0.0.2", "0xc0010000",
                        "--timeout-ms", "20")  # fmt: skip
    assert code == 0 and probes == [{"val": "0xc001", "port": 1, "timeout_ms": 20.0}]


def test_an_unprivileged_user_is_refused_with_exit_6(agent, capsys):
    path, server = agent
    server.is_privileged = lambda _credentials: False
    code, error = _ctl(capsys, path, "device")
    assert code == 6 and "root" in error


def test_no_agent_is_exit_4(tmp_path, capsys):
    code, error = _ctl(capsys, str(tmp_path / "none.sock"), "device")
    assert code == 4 and "none.sock" in str(error)
