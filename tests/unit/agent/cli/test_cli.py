"""Command lines of mrc-agent and mrc-perf: bad arguments, clear messages, exit codes.

Every case here fails before any packet socket is opened, so none needs root.
"""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest

from agent.cli import agent_main, perf_main
from agent.cli.common import parse_size, positive_float, run_command
from agent.io.errors import (
    AgentError,
    ErrorCode,
    ExitCode,
    PeerUnreachableError,
    PortInUseError,
    TransferFailedError,
    error_from_code,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [("4096", 4096), ("64K", 65536), ("1m", 1 << 20), ("2GiB", 2 << 30), ("3 kb", 3072)],
)
def test_sizes_accept_binary_unit_suffixes(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "-1", "0", "1.5M", "10X", "K"])
def test_sizes_that_are_not_positive_whole_sizes_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_size(text)


@pytest.mark.parametrize("text", ["0", "-2", "inf", "nan", "soon"])
def test_durations_must_be_positive_finite_numbers(text):
    with pytest.raises(argparse.ArgumentTypeError):
        positive_float(text)


def _exit_code(main, argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse
        return int(exc.code or 0)


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--to", "h", "--evs", "0"], "--evs"),
        (["--to", "h", "--cc", "tcp"], "--cc"),
        (["--to", "h", "--server"], "not allowed with"),
        ([], "one of the arguments --to --server is required"),
        (["--to", "h", "--duration", "-3"], "--duration"),
        (["--to", "h", "--bytes", "lots"], "--bytes"),
    ],
)
def test_mrc_perf_refuses_bad_arguments_with_exit_2(argv, complaint, capsys):
    assert _exit_code(perf_main.main, argv) == ExitCode.USAGE == 2
    assert complaint in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["send", "f"], "--to"),
        (["serve", "--plane", "10.0.0.1", "--evs", "x"], "--evs"),
        (["serve", "--plane", "10.0.0.1", "--dscp", "control=64"], "control=64 out of range 0-63"),
        (["serve", "--plane", "10.0.0.1", "--dscp", "gold=3"], "unknown DSCP class gold"),
        (["serve", "--plane", "10.0.0.1", "--dscp", "control"], "expected CLASS=VALUE"),
        (["launch"], "invalid choice"),
        ([], "required"),
    ],
)
def test_mrc_agent_refuses_bad_arguments_with_exit_2(argv, complaint, capsys):
    assert _exit_code(agent_main.main, argv) == 2
    assert complaint in capsys.readouterr().err


def test_sending_a_missing_file_fails_with_exit_2_naming_it(tmp_path, capsys):
    missing = tmp_path / "nope.bin"
    assert agent_main.main(["send", str(missing), "--to", "10.0.0.2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mrc-agent: error: cannot read") and str(missing) in err


def test_sending_an_empty_file_fails_with_exit_2(tmp_path, capsys):
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert agent_main.main(["send", str(empty), "--to", "10.0.0.2"]) == 2
    assert "empty" in capsys.readouterr().err


def test_sending_a_directory_fails_with_exit_2(tmp_path, capsys):
    assert agent_main.main(["send", str(tmp_path), "--to", "10.0.0.2"]) == 2
    assert "not a regular file" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", "."])
def test_a_stored_name_with_a_path_in_it_is_refused(tmp_path, name, capsys):
    file = tmp_path / "f.bin"
    file.write_bytes(b"data")
    assert agent_main.main(["send", str(file), "--to", "h", "--name", name]) == 2
    assert "file name" in capsys.readouterr().err


@pytest.mark.parametrize("peer", ["[fd00::1", "[fd00::1]x", "h:0", "h:70000", "h:port", ":1"])
def test_a_malformed_peer_address_fails_with_exit_2(tmp_path, peer, capsys):
    file = tmp_path / "f.bin"
    file.write_bytes(b"data")
    assert agent_main.main(["send", str(file), "--to", peer]) == 2
    assert "mrc-agent: error:" in capsys.readouterr().err


def test_serve_without_a_plane_address_says_how_to_give_one(capsys):
    assert agent_main.main(["serve", "--no-socket"]) == 2
    assert "--plane" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("planes", "complaint"),
    [
        (["10.0.0.1", "fd00::1"], "all IPv4 or all IPv6"),
        (["10.0.0.1", "10.0.0.1"], "repeated"),
        (["0.0.0.0"], "unicast"),
        (["eth0"], "not an IPv4 or IPv6 address"),
    ],
)
def test_bad_plane_addresses_fail_with_exit_2(planes, complaint, capsys):
    argv = ["serve", "--no-socket"] + [arg for plane in planes for arg in ("--plane", plane)]
    assert agent_main.main(argv) == 2
    assert complaint in capsys.readouterr().err


def test_status_without_a_running_agent_fails_with_exit_4(tmp_path, capsys):
    path = tmp_path / "agent.sock"
    assert agent_main.main(["status", "--socket", str(path)]) == 4
    assert f"no agent is running at {path}" in capsys.readouterr().err


def test_own_endpoint_options_are_refused_while_an_agent_owns_the_port(tmp_path, capsys):
    path = str(tmp_path / "agent.sock")
    file = tmp_path / "f.bin"
    file.write_bytes(b"data")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as agent:
        agent.bind(path)
        agent.listen(1)
        code = agent_main.main(
            ["send", str(file), "--to", "h", "--socket", path, "--plane", "10.0.0.1"]
        )
    assert code == 2
    assert "--plane" in capsys.readouterr().err


def test_mrc_perf_refuses_plane_options_while_an_agent_owns_the_port(tmp_path, capsys):
    path = str(tmp_path / "agent.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as agent:
        agent.bind(path)
        agent.listen(1)
        code = perf_main.main(["--to", "h", "--socket", path, "--plane", "10.0.0.1"])
    assert code == 2
    assert "owns UDP 4791" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (PortInUseError("port taken"), 3),
        (PeerUnreachableError("gone"), 4),
        (TransferFailedError("broken"), 5),
    ],
)
def test_run_command_prints_one_error_line_and_returns_its_exit_code(error, code, capsys):
    def failing() -> int:
        raise error

    assert run_command("tool", failing) == code
    assert capsys.readouterr().err == f"tool: error: {error}\n"


def test_run_command_turns_an_interrupt_into_exit_130(capsys):
    def interrupted() -> int:
        raise KeyboardInterrupt

    assert run_command("tool", interrupted) == 130
    assert "interrupted" in capsys.readouterr().err


def test_every_error_code_has_a_distinct_exit_code_and_round_trips():
    codes = {code.exit_code for code in ErrorCode}
    assert len(codes) == len(ErrorCode)
    assert ExitCode.OK not in codes
    for code in ErrorCode:
        rebuilt = error_from_code(code, "text")
        assert isinstance(rebuilt, AgentError)
        assert rebuilt.code is code and rebuilt.exit_code == code.exit_code


def test_help_lists_the_exit_codes(capsys):
    assert _exit_code(agent_main.main, ["--help"]) == 0
    out = capsys.readouterr().out
    for code in ExitCode:
        assert f"  {int(code):>3}  " in out


def test_the_stored_name_defaults_to_the_files_basename(tmp_path):
    args = agent_main.build_parser().parse_args(["send", str(tmp_path / "x.bin"), "--to", "h"])
    assert args.name is None and Path(args.file).name == "x.bin"
