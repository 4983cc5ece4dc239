"""The RoCE baseline through the whole agent: two runtimes over the in-memory link, the side
channel setting up a RoCE QP, files and measurements over it, loss, a dead path.

Every test runs on a ``SteppedClock`` (the local ACK timeout is tens of milliseconds, the
DCQCN timers tens of microseconds): the outcome never depends on how loaded the machine is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.core import IncomingDatagram, IpContext, MrcConfig, OutgoingDatagram
from agent.io.addresses import PeerAddress
from agent.io.endpoints import EndpointPool
from agent.io.errors import ExitCode, ProtocolError, TransferFailedError
from agent.io.file_transfer import FileTransfer
from agent.io.inbound import InboundPolicy, SideChannelServer
from agent.io.perf_transfer import PerfTransfer
from agent.io.runtime import AgentRuntime
from agent.io.side_channel import Hello, Purpose, Welcome, parse_side_message
from agent.io.transport import ROCE, SINGLE, RoceSetup, roce_config_for, roce_setup_for
from agent.roce import RoceConfig, RoceQpSpec
from agent.roce.codec import encode
from agent.roce.packets import RoceCnp
from tests.unit.agent.io.memory_link import (
    PLANE_A,
    PLANE_B,
    SteppedClock,
    memory_link,
    random_loss,
    run_in_steps,
)
from wire.constants import MRC_OPCODE_MIN, ROCE_DATA_OPCODES, RoceDscp, RoceOpcode
from wire.dscp import DscpMap

LOCALHOST = PeerAddress("127.0.0.1", 0)
STEP = 20e-6


class RocePair:
    """Client and server runtimes on one stepped clock, the server with a side channel."""

    def __init__(
        self, out_dir: Path, client_planes: tuple[bytes, ...] = (PLANE_A,),
        server_planes: tuple[bytes, ...] = (PLANE_B,),
    ) -> None:  # fmt: skip
        self.clock = SteppedClock()
        self.link_a, self.link_b = memory_link()
        self.client = AgentRuntime(
            list(client_planes), MrcConfig(), datagram_io=self.link_a, seed=1, clock=self.clock
        )
        self.server = AgentRuntime(
            list(server_planes), MrcConfig(), datagram_io=self.link_b, seed=2, clock=self.clock
        )
        self.side = SideChannelServer(self.server, LOCALHOST, InboundPolicy(out_dir, 1 << 24))
        self.peer = PeerAddress("127.0.0.1", self.side.address.port)
        self.sent: list[OutgoingDatagram] = []
        self.link_a.drop = self._record

    def _record(self, datagram: OutgoingDatagram) -> bool:
        self.sent.append(datagram)
        return False

    def run(self, transfer: FileTransfer | PerfTransfer) -> None:
        transfer.start()
        runtimes = [self.client, self.server]
        run_in_steps(runtimes, self.clock, lambda: transfer.finished, step=STEP)
        run_in_steps(runtimes, self.clock, lambda: not self.side.sessions, step=STEP)

    def close(self) -> None:
        self.client.close()
        self.server.close()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[RocePair]:
    (tmp_path / "out").mkdir()
    made = RocePair(tmp_path / "out")
    yield made
    made.close()


def _roce_file(pair: RocePair, data: bytes, name: str, **roce: int) -> FileTransfer:
    setup = RoceSetup(dataclasses.replace(RoceConfig(), **roce)) if roce else None
    return FileTransfer(
        pair.client, pair.peer, data, name, message_size=64 * 1024,
        transport=ROCE, roce=setup,
    )  # fmt: skip


def test_a_file_over_roce_arrives_byte_identical_in_standard_roce_packets(pair, tmp_path):
    data = os.urandom(300_000)
    transfer = _roce_file(pair, data, "roce.bin")
    pair.run(transfer)
    assert transfer.error is None, transfer.error
    assert (tmp_path / "out" / "roce.bin").read_bytes() == data
    result = transfer.result
    assert result is not None
    assert result["transport"] == "roce"
    assert result["sha256"] == hashlib.sha256(data).hexdigest()
    assert result["roce"]["state"] == "RTS"
    data_packets = [d for d in pair.sent if d.payload[0] in ROCE_DATA_OPCODES]
    assert len(data_packets) == -(-len(data) // 1024)
    # one path: every packet of the QP leaves from the same source port, in RoCE's classes
    assert {d.src_port for d in pair.sent if d.payload[0] < MRC_OPCODE_MIN} == {
        result["roce"]["source_port"]
    }
    assert {d.dscp for d in data_packets} == {RoceDscp.DATA}
    assert all(d.payload[0] < MRC_OPCODE_MIN for d in pair.sent)
    # the receiver's ACKs come back in their own class
    assert pair.link_b.sent > 0
    assert pair.server.pool.qps == () and pair.client.pool.qps == ()


def test_a_file_over_roce_survives_loss_both_ways_by_going_back_n(pair, tmp_path):
    pair.link_a.drop = random_loss(0.02, seed=11)
    pair.link_b.drop = random_loss(0.02, seed=12)
    data = os.urandom(400_000)
    transfer = _roce_file(pair, data, "lossy.bin")
    pair.run(transfer)
    assert transfer.error is None, transfer.error
    assert (tmp_path / "out" / "lossy.bin").read_bytes() == data
    result = transfer.result
    assert result is not None
    roce = result["roce"]
    assert roce["go_backs"] > 0
    assert result["connection"]["retransmits_total"] > 0
    # the responder NAKs a gap once: fewer NAKs than packets it dropped out of sequence
    assert roce["naks_received"] <= roce["go_backs"]


def test_a_dead_path_fails_the_transfer_after_its_retries_with_exit_5(pair):
    first_sent: list[float] = []

    def blackhole(_datagram: OutgoingDatagram) -> bool:
        first_sent.append(pair.clock.now)
        return True  # the path drops everything; the side channel (TCP) still works

    pair.link_a.drop = blackhole
    transfer = _roce_file(pair, os.urandom(100_000), "never.bin", timeout=10, retry_cnt=3)
    transfer.start()
    runtimes = [pair.client, pair.server]
    run_in_steps(runtimes, pair.clock, lambda: transfer.finished, step=100e-6)
    assert isinstance(transfer.error, TransferFailedError)
    assert transfer.error.exit_code == ExitCode.TRANSFER_FAILED == 5
    text = str(transfer.error)
    assert "error state" in text and "retry" in text and "retry_cnt=3" in text
    # four local ACK timeouts of 4.096 us x 2**10 (the first and three retries), no sooner
    timeout = 4.096e-6 * 2**10
    assert 4 * timeout <= pair.clock.now - first_sent[0] < 5 * timeout
    run_in_steps(runtimes, pair.clock, lambda: not pair.side.sessions, step=STEP)
    assert pair.client.pool.qps == () and pair.server.pool.qps == ()


def test_perf_over_roce_reports_the_transport_and_the_qp_state(pair):
    transfer = PerfTransfer(
        pair.client, pair.peer, message_size=16 * 1024, total_bytes=200_000,
        transport=ROCE,
    )  # fmt: skip
    pair.run(transfer)
    assert transfer.error is None, transfer.error
    result = transfer.result
    assert result is not None
    assert result["bytes"] == 200_000
    assert result["receiver"]["bytes_received"] == 200_000
    assert (result["transport"], result["evs"], result["cc"]) == ("roce", 1, "roce-dcqcn")
    assert result["roce"]["cnps_received"] == 0
    # coalesced: fewer ACKs than packets, every one of them heard
    acks = result["receiver"]["roce"]["acks_sent"]
    assert 0 < acks < result["connection"]["data_packets_sent"]
    assert result["roce"]["acks_received"] == acks


def test_a_roce_nic_given_a_slow_line_rate_sends_no_faster_and_reports_it(pair):
    line_rate = 4e6  # bits/s
    transfer = PerfTransfer(
        pair.client, pair.peer, message_size=16 * 1024, total_bytes=100_000,
        transport=ROCE, roce=roce_setup_for(DscpMap(), line_rate=line_rate),
    )  # fmt: skip
    pair.run(transfer)
    assert transfer.error is None, transfer.error
    result = transfer.result
    assert result is not None
    assert result["roce"]["line_rate_bps"] == line_rate
    # paced at the line rate: 98 packets span 97 gaps, hence a percent over it at most
    assert 0.9 * line_rate < result["goodput_bps"] < 1.02 * line_rate


def test_mrc_and_roce_transfers_share_one_agent_sorted_by_opcode(pair, tmp_path):
    mrc_data, roce_data = os.urandom(150_000), os.urandom(150_000)
    mrc = FileTransfer(pair.client, pair.peer, mrc_data, "mrc.bin", message_size=32 * 1024)
    roce = _roce_file(pair, roce_data, "roce.bin")
    mrc.start()
    roce.start()
    runtimes = [pair.client, pair.server]
    run_in_steps(runtimes, pair.clock, lambda: mrc.finished and roce.finished, step=STEP)
    assert mrc.error is None and roce.error is None
    assert (tmp_path / "out" / "mrc.bin").read_bytes() == mrc_data
    assert (tmp_path / "out" / "roce.bin").read_bytes() == roce_data
    assert mrc.result is not None and mrc.result["transport"] == "mrc"
    assert pair.server.pool.drops() == {}


def test_single_is_mrc_on_one_ev(pair):
    config = MrcConfig(ev_set_size=1)
    transfer = PerfTransfer(
        pair.client, pair.peer, message_size=8192, total_bytes=40_000, config=config,
        transport=SINGLE,
    )  # fmt: skip
    pair.run(transfer)
    assert transfer.error is None
    result = transfer.result
    assert result is not None
    assert result["transport"] == "single" and result["evs"] == 1
    assert all(d.payload[0] >= MRC_OPCODE_MIN for d in pair.sent)


def test_a_peer_that_sets_up_mrc_for_a_roce_hello_is_refused_before_any_packet(pair):
    transfer = _roce_file(pair, b"x" * 1000, "x.bin")
    transfer.start()
    # The server answers every hello with what it set up; make it forget the transport.
    original = Welcome.to_json

    def mrc_welcome(self: Welcome) -> dict:
        message = original(self)
        message["transport"] = "mrc"
        return message

    Welcome.to_json = mrc_welcome  # type: ignore[method-assign]
    try:
        run_in_steps([pair.client, pair.server], pair.clock, lambda: transfer.finished, STEP)
    finally:
        Welcome.to_json = original  # type: ignore[method-assign]
    assert isinstance(transfer.error, ProtocolError)
    assert "not the roce one" in str(transfer.error)
    assert not [d for d in pair.sent if d.payload[0] in ROCE_DATA_OPCODES]


def test_hello_and_welcome_carry_the_transport_and_default_to_mrc():
    hello = Hello(5, 0, ("10.0.0.1",), Purpose.SINK, 10, transport="roce")
    assert parse_side_message(hello.to_json()) == hello
    old = hello.to_json()
    del old["transport"]
    parsed = parse_side_message(old)
    assert isinstance(parsed, Hello) and parsed.transport == "mrc"
    bad = hello.to_json() | {"transport": "single"}
    with pytest.raises(ProtocolError, match="unknown transport"):
        parse_side_message(bad)
    welcome = Welcome(7, 1, ("10.0.0.2",), 3, 0, 10, transport="roce")
    assert parse_side_message(welcome.to_json()) == welcome


def test_roce_settings_take_the_agents_dscp_classes_and_verbs_options():
    dscp = DscpMap().replace({"roce_data": 30, "roce_ack": 31, "roce_cnp": 40})
    config = roce_config_for(dscp, timeout=12, retry_cnt=2)
    assert (config.timeout, config.retry_cnt) == (12, 2)
    assert config.local_ack_timeout == pytest.approx(4.096e-6 * 4096)
    assert (config.dscp.roce_data, config.dscp.roce_ack, config.dscp.roce_cnp) == (30, 31, 40)
    assert RoceOpcode.CNP == 0x81


def test_the_pool_sorts_datagrams_by_opcode_only_while_a_roce_qp_exists():
    pool = EndpointPool([PLANE_B], MrcConfig(), seed=3)
    ip = IpContext(PLANE_A, PLANE_B)
    cnp = IncomingDatagram(encode(RoceCnp(77), ip, 0xC000), ip, 0xC000, 48, 0)
    pool.receive_datagrams([cnp], 0.0)
    assert pool.drops() == {"unknown_opcode": 1}  # no RoCE QP: MRC's endpoint counts it
    qp = pool.allocate_qp(pool.roce)
    pool.connect_roce(RoceQpSpec(qp, 77, PLANE_A, 0, 0, RoceConfig()))
    pool.receive_datagrams([cnp], 0.0)
    assert pool.drops() == {"unknown_opcode": 1, "unknown_qp": 1}  # now the RoCE endpoint's
    hit = IncomingDatagram(encode(RoceCnp(qp), ip, 0xC000), ip, 0xC000, 48, 0)
    pool.receive_datagrams([hit], 0.0)
    assert pool.roce.roce_stats(qp).cnps_received == 1
    assert pool.qps == (qp,)
    pool.close(qp)
    assert pool.qps == () and not pool.roce.has_qps


# --- several QPs, profiles --------------------------------------------------------------------

PLANE_A2 = bytes([10, 1, 0, 1])
PLANE_B2 = bytes([10, 1, 0, 2])


def _data_by_port(pair: RocePair) -> dict[int, list[OutgoingDatagram]]:
    """The client's data packets by UDP source port (one per QP)."""
    ports: dict[int, list[OutgoingDatagram]] = {}
    for datagram in pair.sent:
        if datagram.payload[0] in ROCE_DATA_OPCODES:
            ports.setdefault(datagram.src_port, []).append(datagram)
    return ports


def test_a_file_striped_over_four_qps_arrives_whole_each_byte_once_on_four_source_ports(
    pair, tmp_path
):
    data = os.urandom(300_000)
    transfer = FileTransfer(
        pair.client, pair.peer, data, "striped.bin", message_size=16 * 1024,
        transport=ROCE, roce=RoceSetup(RoceConfig(), qps=4),
    )  # fmt: skip
    pair.run(transfer)
    assert transfer.error is None, transfer.error
    assert (tmp_path / "out" / "striped.bin").read_bytes() == data
    result = transfer.result
    assert result is not None
    assert result["roce"]["qps"] == 4 and result["roce"]["state"] == "RTS"
    ports = _data_by_port(pair)
    assert set(ports) == {qp["source_port"] for qp in result["roce_qps"]}
    assert len(ports) == 4
    # round-robin by message, QP k taking messages k, k + 4, ...: 19 messages (18 of 16
    # packets, the last of 5) over 4 QPs
    per_qp = [len(ports[qp["source_port"]]) for qp in result["roce_qps"]]
    assert per_qp == [5 * 16, 5 * 16, 4 * 16 + 5, 4 * 16]
    assert sum(len(packets) for packets in ports.values()) == -(-len(data) // 1024)
    assert result["connection"]["retransmits_total"] == 0
    assert len(result["connection"]["evs"]) == 4  # each QP one path of the set
    assert pair.server.pool.qps == () and pair.client.pool.qps == ()


def test_on_a_multi_plane_host_the_qps_take_every_plane_in_turn(tmp_path):
    (tmp_path / "out").mkdir()
    pair = RocePair(tmp_path / "out", (PLANE_A, PLANE_A2), (PLANE_B, PLANE_B2))
    try:
        transfer = PerfTransfer(
            pair.client, pair.peer, message_size=8192, total_bytes=100_000,
            transport=ROCE, roce=RoceSetup(RoceConfig(), qps=4),
        )  # fmt: skip
        pair.run(transfer)
        assert transfer.error is None, transfer.error
        paths = {(d.ip.src, d.ip.dst) for ports in _data_by_port(pair).values() for d in ports}
        assert paths == {(PLANE_A, PLANE_B), (PLANE_A2, PLANE_B2)}
        planes = [d.ip.src for d in pair.sent if d.payload[0] in ROCE_DATA_OPCODES]
        ports_per_plane = {
            plane: {d.src_port for d in pair.sent if d.ip.src == plane} for plane in set(planes)
        }
        assert [len(ports) for ports in ports_per_plane.values()] == [2, 2]
        assert pair.server.pool.drops() == {}
    finally:
        pair.close()


def test_one_failing_qp_fails_the_whole_transfer(pair):
    victim: list[int] = []

    def lose_one_qp(datagram: OutgoingDatagram) -> bool:
        if not victim and datagram.payload[0] in ROCE_DATA_OPCODES:
            victim.append(datagram.src_port)
        return datagram.src_port in victim

    pair.link_a.drop = lose_one_qp
    setup = RoceSetup(RoceConfig(timeout=10, retry_cnt=3), qps=2)
    transfer = FileTransfer(
        pair.client, pair.peer, os.urandom(200_000), "half.bin", message_size=16 * 1024,
        transport=ROCE, roce=setup,
    )  # fmt: skip
    pair.run(transfer)
    assert isinstance(transfer.error, TransferFailedError)
    assert transfer.error.exit_code == ExitCode.TRANSFER_FAILED
    assert "error state" in str(transfer.error) and "retry_cnt=3" in str(transfer.error)
    assert pair.client.pool.qps == () and pair.server.pool.qps == ()


def test_the_adaptive_profile_runs_selective_repeat_on_both_sides_through_loss(pair, tmp_path):
    pair.link_a.drop = random_loss(0.02, seed=21)
    pair.link_b.drop = random_loss(0.02, seed=22)
    data = os.urandom(400_000)
    setup = roce_setup_for(DscpMap(), profile="adaptive")
    transfer = FileTransfer(
        pair.client, pair.peer, data, "adaptive.bin", message_size=64 * 1024,
        transport=ROCE, roce=setup,
    )  # fmt: skip
    pair.run(transfer)
    assert transfer.error is None, transfer.error
    assert (tmp_path / "out" / "adaptive.bin").read_bytes() == data
    result = transfer.result
    assert result is not None
    roce = result["roce"]
    assert (roce["profile"], roce["qps"]) == ("adaptive", 2)
    assert roce["selective_repeat"] and roce["adaptive_retransmission"]
    assert roce["go_backs"] == 0 and result["connection"]["retransmits_total"] > 0
    assert result["connection"]["srtt_s"] is not None


def test_the_receiver_keeps_early_packets_only_when_the_sender_asks_for_selective_repeat(pair):
    pair.link_a.drop = random_loss(0.03, seed=31)
    results = {}
    for profile in ("nccl", "adaptive"):
        transfer = PerfTransfer(
            pair.client, pair.peer, message_size=16 * 1024, total_bytes=200_000,
            transport=ROCE, roce=roce_setup_for(DscpMap(), profile=profile),
        )  # fmt: skip
        pair.run(transfer)
        assert transfer.error is None, transfer.error
        assert transfer.result is not None
        results[profile] = transfer.result["receiver"]["roce"]
    assert not results["nccl"]["selective_repeat"] and results["nccl"]["out_of_order_kept"] == 0
    assert results["adaptive"]["selective_repeat"] and results["adaptive"]["out_of_order_kept"] > 0


def test_a_peer_that_answers_fewer_qps_is_refused_before_any_packet(pair):
    transfer = FileTransfer(
        pair.client, pair.peer, b"x" * 1000, "x.bin", transport=ROCE,
        roce=RoceSetup(RoceConfig(), qps=3),
    )  # fmt: skip
    transfer.start()
    original = Welcome.to_json

    def one_qp(self: Welcome) -> dict:
        message = original(self)
        del message["extra_qps"]
        return message

    Welcome.to_json = one_qp  # type: ignore[method-assign]
    try:
        run_in_steps([pair.client, pair.server], pair.clock, lambda: transfer.finished, STEP)
    finally:
        Welcome.to_json = original  # type: ignore[method-assign]
    assert isinstance(transfer.error, ProtocolError)
    assert "answered 1 QP(s) for the 3 offered" in str(transfer.error)
    assert not [d for d in pair.sent if d.payload[0] in ROCE_DATA_OPCODES]
    assert pair.client.pool.qps == ()


def test_hello_and_welcome_carry_the_extra_qps_and_selective_repeat_for_roce_only():
    hello = Hello(5, 0, ("10.0.0.1",), Purpose.SINK, 10, transport="roce",
                  extra_qps=((6, 1), (7, 2)), selective_repeat=True)  # fmt: skip
    assert parse_side_message(hello.to_json()) == hello
    welcome = Welcome(8, 1, ("10.0.0.2",), 3, 0, 10, transport="roce",
                      extra_qps=((9, 3), (10, 4)), selective_repeat=True)  # fmt: skip
    assert parse_side_message(welcome.to_json()) == welcome
    plain = Hello(5, 0, ("10.0.0.1",), Purpose.SINK, 10, transport="roce").to_json()
    assert "extra_qps" not in plain and "selective_repeat" not in plain
    mrc = Hello(5, 0, ("10.0.0.1",), Purpose.SINK, 10).to_json()
    with pytest.raises(ProtocolError, match="RoCE"):
        parse_side_message(mrc | {"extra_qps": [[6, 1]]})
    with pytest.raises(ProtocolError, match="RoCE"):
        parse_side_message(mrc | {"selective_repeat": True})
    for bad in ([[6]], [[6, 1, 2]], [[1, 0]], [["6", 1]], [[5, 0]], [[6, 1]] * 64, []):
        with pytest.raises(ProtocolError, match="extra_qps"):
            parse_side_message(plain | {"extra_qps": bad})
