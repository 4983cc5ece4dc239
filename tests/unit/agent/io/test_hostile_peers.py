"""A hostile host on the fabric cannot end the agent, exhaust its memory, or get past its
caller checks: bounded lines, admitted regions, setup slots, ``--allow`` and signed hellos.

Two runtimes in one process over the in-memory datagram link, their side channels real TCP on
127.0.0.1 (as in ``test_transfers``). No root needed.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import ipaddress
import os
import socket
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.core import MrcConfig
from agent.io.addresses import PeerAddress
from agent.io.caller_check import HelloVerifier, load_secret, sign_hello
from agent.io.control_server import ControlServer
from agent.io.errors import (
    ErrorCode,
    ExitCode,
    OverLimitError,
    ProtocolError,
    UnauthorizedError,
    UsageError,
)
from agent.io.file_transfer import FileTransfer
from agent.io.inbound import InboundPolicy, InboundSession, SideChannelServer
from agent.io.json_lines import MAX_DEPTH, MAX_LINE, decode_line, encode_line
from agent.io.perf_transfer import PerfTransfer
from agent.io.runtime import AgentRuntime
from tests.unit.agent.io.memory_link import PLANE_A, PLANE_B, memory_link, run_until

LOCALHOST = PeerAddress("127.0.0.1", 0)
SECRET = b"0123456789abcdef-lab-secret"
MiB = 1 << 20


class Lab:
    """A client runtime, a server runtime with a side channel under ``policy``."""

    def __init__(self, policy: InboundPolicy, client_secret: bytes | None = None) -> None:
        self.link_a, self.link_b = memory_link()
        self.client = AgentRuntime(
            [PLANE_A],
            MrcConfig(),
            datagram_io=self.link_a,
            seed=1,
            side_channel_secret=client_secret,
        )
        self.server = AgentRuntime([PLANE_B], MrcConfig(), datagram_io=self.link_b, seed=2)
        self.side = SideChannelServer(self.server, LOCALHOST, policy)
        self.peer = PeerAddress("127.0.0.1", self.side.address.port)

    def run(self, transfer: FileTransfer | PerfTransfer, timeout: float = 20.0) -> None:
        transfer.start()
        run_until([self.client, self.server], lambda: transfer.finished, timeout)
        run_until([self.client, self.server], lambda: not self.side.sessions, 5.0)

    def close(self) -> None:
        self.client.close()
        self.server.close()


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "out"
    directory.mkdir()
    return directory


@pytest.fixture
def lab(out_dir: Path) -> Iterator[Lab]:
    made = Lab(InboundPolicy(out_dir, max_memory=64 * MiB, max_peer_memory=32 * MiB))
    yield made
    made.close()


def _hello(length: int, purpose: str = "sink", name: str | None = None) -> dict:
    message = {
        "type": "hello",
        "v": 1,
        "qp": 5,
        "psn": 0,
        "planes": ["10.0.0.1"],
        "purpose": purpose,
        "length": length,
    }
    if name is not None:
        message["name"] = name
    return message


def _connect(lab: Lab) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", lab.peer.port), timeout=5)
    sock.setblocking(False)
    return sock


def _reply(lab: Lab, sock: socket.socket, timeout: float = 5.0) -> dict | None:
    """The first line the server sends on ``sock`` (None if it closes without one)."""
    buffer = b""
    closed = False

    def answered() -> bool:
        nonlocal buffer, closed
        try:
            chunk = sock.recv(65536)
        except BlockingIOError:
            return False
        if not chunk:
            closed = True
            return True
        buffer += chunk
        return b"\n" in buffer

    run_until([lab.server], answered, timeout)
    if b"\n" not in buffer:
        assert closed, "the server neither answered nor closed"
        return None
    return decode_line(buffer.split(b"\n", 1)[0])


def _still_serves(lab: Lab, out_dir: Path) -> None:
    data = os.urandom(20_000)
    transfer = FileTransfer(lab.client, lab.peer, data, "after.bin")
    transfer.start()
    run_until([lab.client, lab.server], lambda: transfer.finished, 20.0)
    assert transfer.error is None
    assert (out_dir / "after.bin").read_bytes() == data


# --- bounded lines ----------------------------------------------------------------------


def test_a_line_nested_100000_deep_closes_that_connection_and_the_agent_serves_on(lab, out_dir):
    sock = _connect(lab)
    sock.sendall(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    assert _reply(lab, sock) is None
    sock.close()
    assert lab.side.sessions == set()
    _still_serves(lab, out_dir)


def test_a_deep_line_on_the_control_socket_closes_that_client_only(tmp_path, lab):
    path = str(tmp_path / "agent.sock")
    ControlServer(lab.server, path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as hostile:
        hostile.connect(path)
        line = b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"\n"
        # The line is larger than the socket buffer: send it while the server runs.
        sender = threading.Thread(target=_send_ignoring_reset, args=(hostile, line), daemon=True)
        sender.start()
        run_until([lab.server], lambda: not sender.is_alive(), 5.0)
        hostile.setblocking(False)
        run_until([lab.server], lambda: not _alive(hostile), 5.0)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as honest:
        honest.connect(path)
        honest.sendall(encode_line({"id": 1, "op": "status"}))
        honest.setblocking(False)
        replies: list[bytes] = []

        def answered() -> bool:
            try:
                replies.append(honest.recv(1 << 20))
            except BlockingIOError:
                return False
            return b"\n" in b"".join(replies)

        run_until([lab.server], answered, 5.0)
    status = decode_line(b"".join(replies).split(b"\n", 1)[0])
    assert status["ok"] is True
    assert status["result"]["side_channel"]["limits"]["max_receive_memory"] == 64 * MiB


def test_connections_closed_for_overlong_lines_leave_no_buffers_behind(lab):
    """Each hostile line fills up to MAX_LINE of buffer before the channel closes; that
    buffer must go with the channel, not wait for a garbage collection (the agent runs them
    rarely), or twenty such connections would hold twenty MiB."""
    gc.disable()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(20):
            with socket.create_connection(("127.0.0.1", lab.peer.port), timeout=5) as sock:
                sender = threading.Thread(
                    target=_send_ignoring_reset, args=(sock, b"a" * (MAX_LINE + 65536)), daemon=True
                )
                sender.start()
                run_until([lab.server], lambda sender=sender: not sender.is_alive(), 10.0)
            run_until([lab.server], lambda: not lab.side.sessions, 5.0)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        gc.enable()
    assert after - before < 4 * MiB


def _send_ignoring_reset(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(data)


def _alive(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1000, 100_000])
def test_decode_line_refuses_nesting_beyond_the_bound_as_a_protocol_error(depth):
    line = b'{"x":' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"
    with pytest.raises(ProtocolError, match="nested deeper"):
        decode_line(line)


def test_decode_line_accepts_nesting_up_to_the_bound():
    line = b'{"x":' + b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1) + b"}"
    assert decode_line(line)["x"] is not None


def test_decode_line_refuses_a_line_longer_than_max_line_and_too_many_values():
    with pytest.raises(ProtocolError, match="longer than"):
        decode_line(b'{"x":"' + b"a" * MAX_LINE + b'"}')
    with pytest.raises(ProtocolError, match="values"):
        decode_line(b'{"x":[' + b",".join([b"0"] * 200_000) + b"]}")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_decode_or_raise_protocol_error_only(data):
    with contextlib.suppress(ProtocolError):
        decode_line(data)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=60,
)


@settings(max_examples=300, deadline=None)
@given(_json, st.integers(min_value=0, max_value=40))
def test_arbitrary_json_wrapped_deeply_decodes_or_raises_protocol_error_only(value, wraps):
    import json

    line = json.dumps({"v": value}).encode()
    line = b'{"w":' * wraps + line + b"}" * wraps
    try:
        decoded = decode_line(line)
    except ProtocolError:
        return
    assert isinstance(decoded, dict)


# --- a failing handler ----------------------------------------------------------------


def test_a_bug_in_a_sessions_handler_ends_that_session_and_nothing_else(lab, out_dir, monkeypatch):
    real = InboundSession._accept_hello
    calls = {"n": 0}

    def broken_once(self, hello):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a bug in the hello handler")
        return real(self, hello)

    monkeypatch.setattr(InboundSession, "_accept_hello", broken_once)
    sock = _connect(lab)
    sock.sendall(encode_line(_hello(1000)))
    assert _reply(lab, sock) is None
    sock.close()
    run_until([lab.server], lambda: not lab.side.sessions, 5.0)
    assert lab.side.budget.setups == 0
    _still_serves(lab, out_dir)


def test_a_timer_that_raises_is_logged_and_the_other_timers_still_run(lab):
    ran: list[str] = []
    reactor = lab.server.reactor
    now = lab.server.clock()

    def boom() -> None:
        raise RuntimeError("timer bug")

    reactor.call_at(now, boom)
    reactor.call_at(now, lambda: ran.append("after"))
    reactor.run_timers(now + 1)
    assert ran == ["after"]
    assert reactor.callback_errors == 1


# --- admitted memory ----------------------------------------------------------------------


def test_forty_hellos_for_large_regions_are_admitted_only_up_to_the_memory_caps(lab):
    """The attack that grew an agent to 3.9 GB: forty 1 GiB hellos. Here the regions are
    16 MiB against a 64 MiB total and a 32 MiB per-peer cap: two are welcomed (the peer's
    share), the other thirty-eight refused over_limit with nothing allocated."""
    socks = []
    replies = []
    for _ in range(40):
        sock = _connect(lab)
        sock.sendall(encode_line(_hello(16 * MiB)))
        socks.append(sock)
        replies.append(_reply(lab, sock))
    welcomed = [r for r in replies if r and r["type"] == "welcome"]
    refused = [r for r in replies if r and r["type"] == "error"]
    assert len(welcomed) == 2
    assert len(refused) == 38
    assert {r["code"] for r in refused} == {ErrorCode.OVER_LIMIT.value}
    assert all("--max-peer-memory" in r["message"] for r in refused)
    assert lab.side.budget.memory_held == 32 * MiB
    assert lab.side.budget.refused == {"max_peer_memory": 38}
    for sock in socks:
        sock.close()
    run_until([lab.server], lambda: not lab.side.sessions, 5.0)
    assert lab.side.budget.memory_held == 0


def test_the_total_cap_binds_across_peers(out_dir):
    lab = Lab(InboundPolicy(out_dir, max_memory=8 * MiB, max_peer_memory=8 * MiB))
    try:
        first, second = _connect(lab), _connect(lab)
        first.sendall(encode_line(_hello(6 * MiB)))
        assert _reply(lab, first)["type"] == "welcome"
        second.sendall(encode_line(_hello(4 * MiB)))
        answer = _reply(lab, second)
        assert answer["code"] == "over_limit"
        assert "--max-receive-memory" in answer["message"]
        first.close()
        second.close()
    finally:
        lab.close()


def test_a_sender_refused_over_limit_fails_with_its_own_exit_code(out_dir):
    lab = Lab(InboundPolicy(out_dir, max_memory=1 * MiB, max_peer_memory=1 * MiB))
    try:
        transfer = PerfTransfer(lab.client, lab.peer, message_size=2 * MiB, total_bytes=2 * MiB)
        lab.run(transfer)
        assert isinstance(transfer.error, OverLimitError)
        assert transfer.error.exit_code == ExitCode.OVER_LIMIT == 8
        assert "--max-receive-memory" in str(transfer.error)
    finally:
        lab.close()


def _connect_from(lab: Lab, source: str) -> socket.socket:
    """A side-channel connection from ``source`` (any 127/8 address is this host)."""
    sock = socket.create_connection(
        ("127.0.0.1", lab.peer.port), timeout=5, source_address=(source, 0)
    )
    sock.setblocking(False)
    return sock


def test_idle_openers_beyond_max_setups_are_refused_at_accept(out_dir):
    lab = Lab(InboundPolicy(out_dir, max_memory=8 * MiB, max_setups=8))
    try:
        hosts = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
        idle = [_connect_from(lab, host) for host in hosts * 2]
        run_until([lab.server], lambda: len(lab.side.sessions) == 8, 5.0)
        extra = _connect_from(lab, "127.0.0.6")
        answer = _reply(lab, extra)
        assert answer["code"] == "over_limit"
        assert "--max-setups" in answer["message"]
        for sock in idle:
            sock.close()
        extra.close()
        run_until([lab.server], lambda: lab.side.budget.setups == 0, 5.0)
        assert lab.side.refused_callers == 1
        assert lab.side.budget.refused == {"max_setups": 1}
    finally:
        lab.close()


def test_one_peer_holding_its_share_of_setups_does_not_lock_out_another(out_dir):
    """A quarter of the slots per peer address: an idle opener on 127.0.0.2 gets two of
    eight, its third is refused, and a transfer from 127.0.0.1 still goes through."""
    lab = Lab(InboundPolicy(out_dir, max_memory=8 * MiB, max_setups=8))
    try:
        idle = [_connect_from(lab, "127.0.0.2") for _ in range(2)]
        run_until([lab.server], lambda: len(lab.side.sessions) == 2, 5.0)
        third = _connect_from(lab, "127.0.0.2")
        answer = _reply(lab, third)
        assert answer["code"] == "over_limit"
        assert "a quarter of --max-setups" in answer["message"]
        _still_serves(lab, out_dir)
        for sock in (*idle, third):
            sock.close()
        run_until([lab.server], lambda: lab.side.budget.setups == 0, 5.0)
        assert lab.side.budget.refused == {"max_peer_setups": 1}
    finally:
        lab.close()


# --- files go to disk ---------------------------------------------------------------------


def test_an_incoming_file_is_a_part_file_on_disk_until_committed(lab, out_dir):
    lab.link_a.drop = lambda _d: True  # hold the transfer open
    data = os.urandom(300_000)
    transfer = FileTransfer(lab.client, lab.peer, data, "big.bin")
    transfer.start()
    run_until([lab.client, lab.server], lambda: bool(list(out_dir.glob("*.part"))), 10.0)
    (part,) = out_dir.glob("*.part")
    assert part.stat().st_size == len(data)
    assert lab.side.budget.memory_held == 0  # a file holds disk, not memory
    assert lab.side.budget.disk_reserved == len(data)
    lab.link_a.drop = None
    run_until([lab.client, lab.server], lambda: transfer.finished, 20.0)
    run_until([lab.client, lab.server], lambda: not lab.side.sessions, 5.0)
    assert transfer.error is None
    assert (out_dir / "big.bin").read_bytes() == data
    assert transfer.result["sha256"] == hashlib.sha256(data).hexdigest()
    assert list(out_dir.glob("*.part")) == []
    assert lab.side.budget.disk_reserved == 0


def test_a_part_file_is_removed_when_the_sender_goes_away(lab, out_dir):
    lab.link_a.drop = lambda _d: True
    transfer = FileTransfer(lab.client, lab.peer, os.urandom(100_000), "gone.bin")
    transfer.start()
    run_until([lab.client, lab.server], lambda: bool(list(out_dir.glob("*.part"))), 10.0)
    transfer.cancel("test")
    run_until([lab.client, lab.server], lambda: not lab.side.sessions, 10.0)
    assert list(out_dir.iterdir()) == []


def test_a_file_larger_than_the_free_disk_is_refused_over_limit(out_dir):
    lab = Lab(InboundPolicy(out_dir))
    lab.side.budget._disk_free = lambda _d: 100 * MiB
    try:
        transfer = FileTransfer(lab.client, lab.peer, b"z" * (40 * MiB), "huge.bin")
        lab.run(transfer)
        assert isinstance(transfer.error, OverLimitError)
        assert "free in the out-dir" in str(transfer.error)
        assert list(out_dir.iterdir()) == []
    finally:
        lab.close()


# --- who may call -------------------------------------------------------------------------


def test_a_caller_outside_allow_is_refused_unauthorized(out_dir):
    policy = InboundPolicy(out_dir, allow=(ipaddress.ip_network("10.0.0.0/8"),))
    lab = Lab(policy)
    try:
        transfer = FileTransfer(lab.client, lab.peer, b"data", "f.bin")
        lab.run(transfer)
        assert isinstance(transfer.error, UnauthorizedError)
        assert transfer.error.exit_code == ExitCode.UNAUTHORIZED
        assert "--allow" in str(transfer.error)
        assert lab.side.refused_callers == 1
    finally:
        lab.close()


def test_a_caller_inside_allow_is_served(out_dir):
    lab = Lab(InboundPolicy(out_dir, allow=(ipaddress.ip_network("127.0.0.0/8"),)))
    try:
        _still_serves(lab, out_dir)
    finally:
        lab.close()


def test_with_a_secret_only_signed_hellos_are_welcomed(out_dir):
    lab = Lab(InboundPolicy(out_dir, secret=SECRET), client_secret=SECRET)
    try:
        _still_serves(lab, out_dir)
        unsigned = _connect(lab)
        unsigned.sendall(encode_line(_hello(100)))
        answer = _reply(lab, unsigned)
        assert answer["code"] == "unauthorized"
        unsigned.close()
    finally:
        lab.close()


def test_a_sender_with_the_wrong_secret_fails_unauthorized(out_dir):
    lab = Lab(InboundPolicy(out_dir, secret=SECRET), client_secret=b"another-secret-16-bytes")
    try:
        transfer = FileTransfer(lab.client, lab.peer, b"data", "f.bin")
        lab.run(transfer)
        assert isinstance(transfer.error, UnauthorizedError)
        assert not (out_dir / "f.bin").exists()
    finally:
        lab.close()


def test_a_signed_hello_cannot_be_replayed_altered_or_used_late():
    now = time.time()
    verifier = HelloVerifier(SECRET)
    signed = sign_hello(_hello(100), SECRET, now)
    verifier.verify(signed, now)
    with pytest.raises(UnauthorizedError, match="replayed"):
        verifier.verify(signed, now + 1)
    altered = {**sign_hello(_hello(100), SECRET, now), "length": 1 << 30}
    with pytest.raises(UnauthorizedError, match="failed"):
        verifier.verify(altered, now)
    late = sign_hello(_hello(100), SECRET, now - 600)
    with pytest.raises(UnauthorizedError, match="off this agent's clock"):
        verifier.verify(late, now)
    with pytest.raises(UnauthorizedError, match="requires authenticated"):
        verifier.verify(_hello(100), now)


def test_a_secret_file_must_be_private_and_long_enough(tmp_path):
    path = tmp_path / "lab.secret"
    path.write_bytes(SECRET + b"\n")
    path.chmod(0o600)
    assert load_secret(str(path)) == SECRET
    path.chmod(0o640)
    with pytest.raises(UsageError, match="chmod 600"):
        load_secret(str(path))
    path.write_bytes(b"short")
    path.chmod(0o600)
    with pytest.raises(UsageError, match="at least 16 bytes"):
        load_secret(str(path))
