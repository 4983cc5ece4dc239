"""Standard RoCEv2 next to MRC on UDP 4791: scapy hands standard opcodes to its RoCE layers
(and ours for RETH and ImmDt), MRC's to MRC's; the Lua dissector leaves standard opcodes to
Wireshark's InfiniBand dissector. The packets are the RoCE baseline's own (``agent.roce``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from scapy.utils import wrpcap

import wire
from agent.core.datagram import IpContext
from agent.roce.codec import encode
from agent.roce.packets import RoceAck, RoceCnp, RoceData, RocePacket
from wire.constants import AETH_CREDIT_INVALID, ROCEV2_UDP_PORT, AethSyndrome, RoceOpcode
from wire.frames import DEFAULT_DST_MAC, DEFAULT_SRC_MAC, Envelope, mrc_data_packet
from wire.layers import (
    AETH,
    BTH,
    CNPPadding,
    MrcBTH,
    MrcMETH,
    MrcRETH,
    RoceImmDt,
    RoceRETH,
    icrc_matches,
)

SRC, DST = "10.0.0.1", "10.0.0.2"
SPORT = 0xC123  # a RoCE QP's source port, in RoCEv2's entropy range
IP4 = IpContext(bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))

CASES: list[tuple[str, RocePacket, list[type[Packet]]]] = [
    ("first", RoceData(RoceOpcode.RC_RDMA_WRITE_FIRST, 7, 100, b"a" * 1024, False, 0x1000,
                       0x55, 3000), [BTH, RoceRETH, Raw]),
    ("middle", RoceData(RoceOpcode.RC_RDMA_WRITE_MIDDLE, 7, 101, b"b" * 1024), [BTH, Raw]),
    ("last_imm", RoceData(RoceOpcode.RC_RDMA_WRITE_LAST_IMM, 7, 102, b"c" * 952, True,
                          immediate=0xDEAD), [BTH, RoceImmDt, Raw]),
    ("only", RoceData(RoceOpcode.RC_RDMA_WRITE_ONLY, 7, 3, b"wxyz", True, 5, 6, 4),
     [BTH, RoceRETH, Raw]),
    ("only_imm", RoceData(RoceOpcode.RC_RDMA_WRITE_ONLY_IMM, 7, 3, b"wxyz", True, 5, 6, 4,
                          0xBEEF), [BTH, RoceRETH, RoceImmDt, Raw]),
    ("ack", RoceAck(7, 102, AethSyndrome.ACK | AETH_CREDIT_INVALID, 3), [BTH, AETH]),
    ("nak", RoceAck(7, 99, AethSyndrome.NAK_PSN_SEQUENCE_ERROR, 3), [BTH, AETH]),
    ("cnp", RoceCnp(7), [BTH, CNPPadding]),
]  # fmt: skip


def frame_of(packet: RocePacket) -> Packet:
    return Ether(
        bytes(
            Ether(src=DEFAULT_SRC_MAC, dst=DEFAULT_DST_MAC)
            / IP(src=SRC, dst=DST, id=0, flags="DF")
            / UDP(sport=SPORT, dport=ROCEV2_UDP_PORT, chksum=0)
            / Raw(encode(packet, IP4, SPORT))
        )
    )


def chain(frame: Packet) -> list[type[Packet]]:
    layer, out = frame[UDP].payload, []
    while layer:
        out.append(type(layer))
        layer = layer.payload
    return out


@pytest.mark.parametrize(("label", "packet", "expected"), CASES, ids=[c[0] for c in CASES])
def test_standard_opcodes_dissect_as_rocev2_with_the_headers_they_carry(label, packet, expected):
    frame = frame_of(packet)
    assert chain(frame) == expected
    bth = frame[BTH]
    assert (bth.opcode, bth.dqpn) == (packet.opcode if isinstance(packet, RoceData) else
                                      0x11 if isinstance(packet, RoceAck) else 0x81, 7)  # fmt: skip
    assert icrc_matches(frame)
    # scapy's own RoCE module computes the same ICRC the agent wrote
    assert bth.compute_icrc(b"") == bytes(frame[UDP].payload)[-4:]
    if isinstance(packet, RoceData) and frame.haslayer(RoceRETH):
        reth = frame[RoceRETH]
        assert (reth.va, reth.rkey, reth.dma_length) == (packet.va, packet.rkey, packet.dma_length)
    if isinstance(packet, RoceAck):
        assert (frame[AETH].syndrome, frame[AETH].msn) == (packet.syndrome, packet.msn)
    if isinstance(packet, RoceCnp):
        assert frame[BTH].becn == 1


def test_mrc_opcodes_still_dissect_as_mrc():
    envelope = Envelope(src_ip=SRC, dst_ip=DST, ev=SPORT << 16)
    frame = Ether(bytes(mrc_data_packet(envelope, dqpn=1, psn=2, payload=b"x")))
    assert chain(frame) == [MrcBTH, MrcMETH, MrcRETH, Raw]
    assert not frame.haslayer(BTH)


def test_building_roce_layers_sets_the_port_and_the_opcode():
    built = IP(src=SRC, dst=DST) / UDP(sport=SPORT) / BTH(dqpn=3) / RoceRETH(dma_length=4) / b"abcd"
    dissected = IP(bytes(built))
    assert dissected[UDP].dport == ROCEV2_UDP_PORT
    assert dissected[BTH].opcode == RoceOpcode.RC_RDMA_WRITE_ONLY
    assert icrc_matches(dissected)


TSHARK = shutil.which("tshark")
DISSECTOR = Path(wire.__file__).with_name("mrc.lua")


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed")
def test_wireshark_decodes_the_baselines_packets_as_infiniband_and_the_lua_leaves_them(tmp_path):
    pcap = tmp_path / "roce.pcap"
    envelope = Envelope(src_ip=SRC, dst_ip=DST, ev=SPORT << 16)
    frames = [frame_of(packet) for _, packet, _ in CASES]
    frames.append(Ether(bytes(mrc_data_packet(envelope, dqpn=1, psn=2, payload=b"x"))))
    wrpcap(str(pcap), frames)
    fields = ["infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.reth.va",
              "infiniband.reth.dmalen", "infiniband.aeth.syndrome", "infiniband.immdt",
              "mrc.bth.opcode"]  # fmt: skip
    command = [str(TSHARK), "-n", "-X", f"lua_script:{DISSECTOR}", "-r", str(pcap), "-T", "json"]
    for field in fields:
        command += ["-e", field]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "Lua Error" not in result.stdout + result.stderr
    decoded = [packet["_source"]["layers"] for packet in json.loads(result.stdout)]
    *roce, mrc = decoded
    for (label, packet, _), layers in zip(CASES, roce, strict=True):
        assert "mrc.bth.opcode" not in layers, label
        opcode = packet.opcode if isinstance(packet, RoceData) else None
        if opcode is not None:
            assert int(layers["infiniband.bth.opcode"][0]) == opcode, label
        assert int(layers["infiniband.bth.destqp"][0], 0) == 7, label
    first = roce[0]
    assert int(first["infiniband.reth.va"][0], 0) == 0x1000
    assert int(first["infiniband.reth.dmalen"][0]) == 3000
    assert int(roce[2]["infiniband.immdt"][0].replace(":", ""), 16) == 0xDEAD
    assert int(roce[6]["infiniband.aeth.syndrome"][0], 0) == AethSyndrome.NAK_PSN_SEQUENCE_ERROR
    assert int(mrc["mrc.bth.opcode"][0], 0) == 0xCA
