"""Side channel, inbound sessions and transfers end to end, over an in-memory datagram link.

Two ``AgentRuntime``s in one process; their MRC datagrams cross a ``MemoryDatagramIO`` link,
their side channels a real TCP connection on 127.0.0.1. No root needed.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.core import MrcConfig, OutgoingDatagram
from agent.io.addresses import PeerAddress
from agent.io.errors import (
    ErrorCode,
    ExitCode,
    OverLimitError,
    PeerUnreachableError,
    TransferFailedError,
)
from agent.io.file_transfer import FileTransfer
from agent.io.inbound import InboundPolicy, SideChannelServer
from agent.io.json_lines import decode_line, encode_line
from agent.io.perf_transfer import PerfSample, PerfTransfer
from agent.io.runtime import AgentRuntime
from tests.unit.agent.io.memory_link import (
    PLANE_A,
    PLANE_B,
    MemoryDatagramIO,
    SteppedClock,
    memory_link,
    random_loss,
    run_in_steps,
    run_until,
)

LOCALHOST = PeerAddress("127.0.0.1", 0)


class Pair:
    """A client runtime, a server runtime with a side channel, and the link between them."""

    def __init__(
        self,
        out_dir: Path | None,
        max_region: int = 1 << 24,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.link_a, self.link_b = memory_link()
        self.client = AgentRuntime(
            [PLANE_A], MrcConfig(), datagram_io=self.link_a, seed=1, clock=clock
        )
        self.server = AgentRuntime(
            [PLANE_B], MrcConfig(), datagram_io=self.link_b, seed=2, clock=clock
        )
        self.side = SideChannelServer(self.server, LOCALHOST, InboundPolicy(out_dir, max_region))
        self.peer = PeerAddress("127.0.0.1", self.side.address.port)

    def run(self, transfer: FileTransfer | PerfTransfer, timeout: float = 20.0) -> None:
        transfer.start()
        run_until([self.client, self.server], lambda: transfer.finished, timeout)
        # let the server see the side channel close and tear its session down
        run_until([self.client, self.server], lambda: not self.side.sessions, 5.0)

    def close(self) -> None:
        self.client.close()
        self.server.close()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    made = Pair(tmp_path / "out")
    (tmp_path / "out").mkdir()
    yield made
    made.close()


def test_a_file_arrives_byte_identical_and_the_result_carries_the_receivers_digest(pair, tmp_path):
    data = os.urandom(300_000)
    transfer = FileTransfer(pair.client, pair.peer, data, "blob.bin", message_size=64 * 1024)
    pair.run(transfer)
    assert transfer.error is None
    stored = tmp_path / "out" / "blob.bin"
    assert stored.read_bytes() == data
    assert transfer.result is not None
    assert transfer.result["sha256"] == hashlib.sha256(data).hexdigest()
    assert transfer.result["remote_path"] == str(stored)
    assert transfer.result["messages"] == 5


def test_a_file_survives_five_percent_loss_in_both_directions(pair, tmp_path):
    pair.link_a.drop = random_loss(0.05, seed=7)
    pair.link_b.drop = random_loss(0.05, seed=8)
    data = os.urandom(200_000)
    transfer = FileTransfer(pair.client, pair.peer, data, "lossy.bin", message_size=32 * 1024)
    pair.run(transfer, timeout=60.0)
    assert transfer.error is None
    assert (tmp_path / "out" / "lossy.bin").read_bytes() == data
    assert pair.link_a.dropped > 0
    assert transfer.result is not None
    assert transfer.result["connection"]["retransmits_total"] > 0


def test_the_server_releases_region_and_connection_when_a_transfer_ends(pair):
    transfer = FileTransfer(pair.client, pair.peer, b"x" * 5000, "small.bin")
    pair.run(transfer)
    assert transfer.error is None
    assert pair.server.pool.default.connections == ()
    assert pair.client.pool.default.connections == ()
    assert pair.side.sessions == set()


def test_an_agent_without_out_dir_refuses_files_with_transfer_failed(tmp_path):
    pair = Pair(out_dir=None)
    try:
        transfer = FileTransfer(pair.client, pair.peer, b"data", "f.bin")
        pair.run(transfer)
        assert isinstance(transfer.error, TransferFailedError)
        assert "--out-dir" in str(transfer.error)
        assert pair.server.pool.default.connections == ()
    finally:
        pair.close()


def test_a_region_larger_than_max_region_is_refused_as_over_limit(tmp_path):
    (tmp_path / "out").mkdir()
    pair = Pair(out_dir=tmp_path / "out", max_region=1000)
    try:
        transfer = FileTransfer(pair.client, pair.peer, b"y" * 1001, "big.bin")
        pair.run(transfer)
        assert isinstance(transfer.error, OverLimitError)
        assert transfer.error.exit_code == ExitCode.OVER_LIMIT
        assert "--max-region" in str(transfer.error)
        assert not (tmp_path / "out" / "big.bin").exists()
    finally:
        pair.close()


def test_a_peer_without_side_channel_is_unreachable_with_a_clear_message(pair):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    transfer = FileTransfer(pair.client, PeerAddress("127.0.0.1", port), b"z", "z.bin")
    transfer.start()
    run_until([pair.client], lambda: transfer.finished, 10.0)
    assert isinstance(transfer.error, PeerUnreachableError)
    assert "connection refused" in str(transfer.error)
    assert transfer.error.exit_code == 4


def test_perf_with_a_byte_budget_confirms_exactly_that_many_bytes(pair):
    transfer = PerfTransfer(pair.client, pair.peer, message_size=16 * 1024, total_bytes=100_000)
    pair.run(transfer)
    assert transfer.error is None
    result = transfer.result
    assert result is not None
    assert result["bytes"] == 100_000
    assert result["receiver"]["bytes_received"] == 100_000
    assert result["goodput_bps"] > 0
    assert len(result["connection"]["evs"]) >= 256


def test_perf_with_one_ev_uses_its_own_endpoint_and_a_single_path(pair):
    config = MrcConfig(ev_set_size=1, congestion_control="fixed")
    transfer = PerfTransfer(
        pair.client, pair.peer, message_size=8192, total_bytes=50_000, config=config
    )
    pair.run(transfer)
    assert transfer.error is None
    result = transfer.result
    assert result is not None
    assert result["evs"] == 1 and result["cc"] == "fixed"
    used = [ev for ev in result["connection"]["evs"] if ev["uses"]]
    assert len(used) == 1
    assert len(pair.client.pool.endpoints) == 2


def test_perf_for_a_duration_reports_interval_samples(tmp_path):
    # On the real clock a stall of 0.1 s would push the second sample past the end of the
    # run; on a stepped clock the samples fall at 0.1 s and 0.2 s, the end at 0.3 s.
    clock = SteppedClock()
    pair = Pair(tmp_path / "out", clock=clock)
    samples: list[PerfSample] = []
    try:
        transfer = PerfTransfer(
            pair.client,
            pair.peer,
            message_size=4096,
            duration=0.3,
            interval=0.1,
            on_progress=samples.append,
        )
        transfer.start()
        run_in_steps([pair.client, pair.server], clock, lambda: transfer.finished, step=100e-6)
    finally:
        pair.close()
    assert transfer.error is None
    assert transfer.result is not None
    assert [round(sample.elapsed, 3) for sample in samples] == [0.1, 0.2]
    assert all(sample.interval_bytes > 0 for sample in samples)
    assert len(transfer.result["intervals"]) == len(samples)
    assert samples[-1].total_bytes <= transfer.result["bytes"]


def _side_channel_exchange(pair: Pair, lines: list[bytes]) -> list[dict]:
    """Send raw lines to the server's side channel; return what it answered."""
    replies: list[dict] = []
    with socket.create_connection(("127.0.0.1", pair.peer.port), timeout=5) as sock:
        sock.setblocking(False)
        for line in lines:
            sock.sendall(line)
        buffer = b""

        def answered() -> bool:
            nonlocal buffer
            try:
                chunk = sock.recv(65536)
            except BlockingIOError:
                return False
            if not chunk:
                return True
            buffer += chunk
            return False

        run_until([pair.server], answered, 5.0)
    for raw in buffer.splitlines():
        replies.append(decode_line(raw))
    return replies


def test_a_garbage_line_on_the_side_channel_closes_only_that_session(pair):
    replies = _side_channel_exchange(pair, [b"this is not json\n"])
    assert replies == []
    assert pair.side.sessions == set()
    transfer = FileTransfer(pair.client, pair.peer, b"still works", "after.bin")
    pair.run(transfer)
    assert transfer.error is None


def test_a_hello_of_another_protocol_version_is_refused_with_a_protocol_error(pair):
    hello = {
        "type": "hello",
        "v": 99,
        "qp": 5,
        "psn": 0,
        "planes": ["10.0.0.1"],
        "purpose": "sink",
        "length": 10,
    }
    replies = _side_channel_exchange(pair, [encode_line(hello)])
    assert len(replies) == 1
    assert replies[0]["type"] == "error"
    assert replies[0]["code"] == ErrorCode.PROTOCOL_ERROR.value
    assert "version" in replies[0]["message"]


def test_a_hello_with_a_different_plane_count_is_refused(pair):
    hello = {
        "type": "hello",
        "v": 1,
        "qp": 5,
        "psn": 0,
        "planes": ["10.0.0.1", "10.0.1.1"],
        "purpose": "sink",
        "length": 10,
    }
    replies = _side_channel_exchange(pair, [encode_line(hello)])
    assert replies[0]["type"] == "error"
    assert "plane count" in replies[0]["message"]
    assert pair.server.pool.default.connections == ()


def test_a_peer_that_vanishes_mid_transfer_leaves_nothing_behind(pair):
    pair.link_a.drop = lambda _d: True  # no data ever arrives: the transfer hangs
    data = os.urandom(50_000)
    transfer = FileTransfer(pair.client, pair.peer, data, "never.bin")
    transfer.start()
    run_until([pair.client, pair.server], lambda: pair.server.pool.default.connections != (), 10.0)
    transfer.cancel("test")
    run_until([pair.client, pair.server], lambda: not pair.side.sessions, 10.0)
    assert pair.server.pool.default.connections == ()
    assert isinstance(transfer.error, TransferFailedError)


class _RefusingIO(MemoryDatagramIO):
    """A link end whose socket buffer is 'full' for every third send: the runtime must keep
    the refused datagram, wait for writability and send it again, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.refusals = 0
        self._calls = 0
        self._writable, self._other_end = socket.socketpair()
        self.order: list[bytes] = []

    def send(self, datagram: OutgoingDatagram) -> bool:
        self._calls += 1
        if self._calls % 3 == 0:
            self.refusals += 1
            return False
        self.order.append(datagram.payload)
        return super().send(datagram)

    def send_waiters(self) -> list[int]:
        return [self._writable.fileno()]

    def close(self) -> None:
        super().close()
        self._writable.close()
        self._other_end.close()


def test_datagrams_a_full_socket_refuses_wait_in_order_and_none_is_lost(tmp_path):
    # "None is lost" is read off the retransmit count, which a spurious RTO would spoil on a
    # busy machine: both runtimes run on a stepped clock, 10 us a round.
    clock = SteppedClock()
    refusing, other = _RefusingIO(), MemoryDatagramIO()
    refusing.peer, other.peer = other, refusing
    client = AgentRuntime([PLANE_A], MrcConfig(), datagram_io=refusing, seed=5, clock=clock)
    server = AgentRuntime([PLANE_B], MrcConfig(), datagram_io=other, seed=6, clock=clock)
    (tmp_path / "out").mkdir()
    side = SideChannelServer(server, LOCALHOST, InboundPolicy(tmp_path / "out"))
    try:
        data = os.urandom(150_000)
        transfer = FileTransfer(client, PeerAddress("127.0.0.1", side.address.port), data, "bp.bin")
        transfer.start()
        run_in_steps([client, server], clock, lambda: transfer.finished)
        assert transfer.error is None
        assert (tmp_path / "out" / "bp.bin").read_bytes() == data
        assert refusing.refusals > 10
        assert transfer.result is not None
        assert transfer.result["connection"]["retransmits_total"] == 0
        data_packets = [p for p in refusing.order if 0xC6 <= p[0] <= 0xCB]
        first = int.from_bytes(data_packets[0][9:12], "big")
        offsets = [(int.from_bytes(p[9:12], "big") - first) & 0xFFFFFF for p in data_packets]
        assert offsets == sorted(offsets)  # sent in PSN order despite the refusals
    finally:
        client.close()
        server.close()


def test_a_path_that_passes_probes_but_never_data_fails_the_transfer_as_stalled(pair):
    data_opcodes = range(0xC6, 0xCC)
    pair.link_a.drop = lambda datagram: datagram.payload[0] in data_opcodes
    transfer = FileTransfer(pair.client, pair.peer, b"d" * 20_000, "hole.bin", stall_timeout=1.5)
    pair.run(transfer, timeout=30.0)
    assert isinstance(transfer.error, TransferFailedError)
    assert "no data acknowledged" in str(transfer.error)
    # The message says what held the data back: here every data packet was lost, probes not
    # (a timeout retires one EV, whose probes then pass: the EVs look healthy, the data not).
    assert re.search(r"[1-9]\d* data packets sent, 0 acked", str(transfer.error))
    assert re.search(r"EV probes [1-9]\d* sent, [1-9]\d* answered", str(transfer.error))
    assert transfer.error.exit_code == 5


def test_a_peer_that_falls_silent_fails_the_transfer_with_the_connections_state(pair):
    # Data gets through, but nothing comes back once the first SACK has: the peer is silent
    # for the peer timeout. The error names the cause and what the connection looked like
    # (as a stall's does), since such a failure is rarely reproducible.
    answered: list[bool] = []

    def silence_after_the_first_answer(_datagram: OutgoingDatagram) -> bool:
        answered.append(True)
        return len(answered) > 1

    pair.link_b.drop = silence_after_the_first_answer
    transfer = FileTransfer(pair.client, pair.peer, b"s" * 200_000, "silent.bin")
    pair.run(transfer, timeout=30.0)
    assert isinstance(transfer.error, TransferFailedError)
    message = str(transfer.error)
    assert "peer unreachable: nothing heard for" in message, message
    assert re.search(r"rto [\d.e-]+ s after [1-9]\d* timeouts", message), message
    assert re.search(r"[1-9]\d* data packets sent, [1-9]\d* acked", message), message
    assert re.search(r"EV probes \d+ sent, \d+ answered", message), message
