"""``--transport mrc|single|roce``, the RoCE profile, QP count, verbs options and line rate on
the command line and through the control socket; a failed RoCE transfer exits 5."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from agent.cli import agent_main, perf_main
from agent.io.control_protocol import PerfRequest, SendRequest, parse_request
from agent.io.errors import ExitCode, ProtocolError


def _exit_code(main, argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse
        return int(exc.code or 0)


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--transport", "roce", "--evs", "4"], "--evs configure MRC"),
        (["--transport", "roce", "--cc", "nscc"], "--cc configure MRC"),
        (["--transport", "single", "--evs", "8"], "cannot take --evs 8"),
        (["--roce-timeout", "10"], "add --transport roce"),
        (["--transport", "mrc", "--roce-retry-cnt", "3"], "add --transport roce"),
        (["--transport", "roce", "--roce-timeout", "32"], "must be in 0-31"),
        (["--transport", "roce", "--roce-retry-cnt", "8"], "must be in 0-7"),
        (["--transport", "roce", "--payload", "1000"], "path MTU"),
        (["--transport", "tcp"], "invalid choice"),
        (["--roce-profile", "nccl"], "add --transport roce"),
        (["--qps", "4"], "add --transport roce"),
        (["--transport", "roce", "--roce-profile", "cx7"], "invalid choice"),
        (["--transport", "roce", "--qps", "65"], "must be in 1-64"),
        (["--roce-line-rate", "4e5"], "add --transport roce"),
        (["--transport", "roce", "--roce-line-rate", "0"], "must be in 100000-1.6e+12"),
        (["--transport", "roce", "--roce-line-rate=-4e5"], "must be in 100000-1.6e+12"),
        (["--transport", "roce", "--roce-line-rate", "fast"], "is not a number"),
    ],
)
def test_options_that_do_not_go_with_the_transport_are_refused_with_exit_2(argv, complaint, capsys):
    assert _exit_code(perf_main.main, ["--to", "h", "--no-agent", *argv]) == ExitCode.USAGE
    assert complaint in capsys.readouterr().err


def test_send_refuses_them_too(tmp_path, capsys):
    file = tmp_path / "f.bin"
    file.write_bytes(b"data")
    argv = ["send", str(file), "--to", "h", "--transport", "single", "--evs", "2"]
    assert _exit_code(agent_main.main, argv) == ExitCode.USAGE
    assert "--evs 2" in capsys.readouterr().err


class FakeAgent:
    """A control socket that records the request line and answers with ``reply``."""

    def __init__(self, path: str, reply: dict) -> None:
        self.request: dict = {}
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        self._listener.listen(1)
        self._reply = reply
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self._listener.accept()
        with conn:
            line = conn.makefile("rb").readline()
            self.request = json.loads(line)
            answer = dict(self._reply, id=self.request["id"])
            conn.sendall(json.dumps(answer).encode() + b"\n")

    def close(self) -> None:
        self._thread.join(10)
        self._listener.close()


def test_send_through_the_agent_carries_the_transport_and_a_failed_qp_exits_5(tmp_path, capsys):
    path = str(tmp_path / "agent.sock")
    file = tmp_path / "f.bin"
    file.write_bytes(b"data")
    error = {"code": "transfer_failed", "message": "QP entered the error state: retry"}
    agent = FakeAgent(path, {"ok": False, "error": error})
    try:
        argv = ["send", str(file), "--to", "h", "--socket", path, "--transport", "roce",
                "--roce-timeout", "12", "--roce-retry-cnt", "3"]  # fmt: skip
        code = agent_main.main(argv)
    finally:
        agent.close()
    assert code == ExitCode.TRANSFER_FAILED == 5
    assert "QP entered the error state" in capsys.readouterr().err
    request = agent.request
    assert (request["op"], request["transport"]) == ("send", "roce")
    assert (request["roce_timeout"], request["roce_retry_cnt"]) == (12, 3)


def test_perf_through_the_agent_carries_the_roce_profile_and_qp_count(tmp_path):
    path = str(tmp_path / "agent.sock")
    error = {"code": "transfer_failed", "message": "QP entered the error state"}
    agent = FakeAgent(path, {"ok": False, "error": error})
    try:
        argv = ["--to", "h", "--socket", path, "--transport", "roce", "--roce-profile",
                "adaptive", "--qps", "16"]  # fmt: skip
        code = perf_main.main(argv)
    finally:
        agent.close()
    assert code == ExitCode.TRANSFER_FAILED
    assert (agent.request["roce_profile"], agent.request["roce_qps"]) == ("adaptive", 16)


def test_perf_through_the_agent_carries_the_roce_line_rate(tmp_path):
    path = str(tmp_path / "agent.sock")
    agent = FakeAgent(path, {"ok": False, "error": {"code": "transfer_failed", "message": "x"}})
    try:
        perf_main.main(["--to", "h", "--socket", path, "--transport", "roce",
                        "--roce-line-rate", "400000"])  # fmt: skip
    finally:
        agent.close()
    assert agent.request["roce_line_rate"] == 400000


def test_the_control_protocol_round_trips_and_checks_the_transport_fields():
    send = SendRequest("/f", "h", transport="roce", roce_timeout=0, roce_retry_cnt=7)
    assert parse_request(send.to_json(1)) == send
    perf = PerfRequest("h", transport="single", evs=1)
    assert parse_request(perf.to_json(2)) == perf
    assert "transport" not in SendRequest("/f", "h").to_json(3)
    with pytest.raises(ProtocolError, match="unknown transport"):
        parse_request(SendRequest("/f", "h").to_json(4) | {"transport": "udp"})
    with pytest.raises(ProtocolError, match="roce_timeout"):
        parse_request(SendRequest("/f", "h").to_json(5) | {"roce_timeout": 40})
    roce = PerfRequest("h", transport="roce", roce_profile="nccl", roce_qps=4)
    assert parse_request(roce.to_json(6)) == roce
    with pytest.raises(ProtocolError, match="unknown RoCE profile 'cx7'"):
        parse_request(SendRequest("/f", "h").to_json(7) | {"roce_profile": "cx7"})
    with pytest.raises(ProtocolError, match="roce_qps"):
        parse_request(SendRequest("/f", "h").to_json(8) | {"roce_qps": 0})
    slowed = PerfRequest("h", transport="roce", roce_line_rate=4e5)
    assert parse_request(slowed.to_json(9)) == slowed
    for bad in (0, -4e5, 5e4, "fast", True):
        with pytest.raises(ProtocolError, match="roce_line_rate"):
            parse_request(SendRequest("/f", "h").to_json(10) | {"roce_line_rate": bad})


def test_help_names_the_transports(capsys):
    assert _exit_code(perf_main.main, ["--help"]) == 0
    text = capsys.readouterr().out
    assert "--transport {mrc,single,roce}" in text and "--roce-timeout" in text
    assert "--roce-profile {perftest,nccl,adaptive}" in text and "--qps N" in text
    assert "--roce-line-rate BPS" in text
