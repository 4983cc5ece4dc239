"""The Wireshark Lua dissector (wire/mrc.lua), run by tshark on captures of our layers."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from scapy.utils import wrpcap

import wire
from wire.constants import ICRC_LEN, ROCEV2_UDP_PORT, EpType, Opcode
from wire.frames import (
    DEFAULT_DST_MAC,
    DEFAULT_SRC_MAC,
    Envelope,
    ev_of,
    mrc_data_packet,
    mrc_ep_response,
    trim,
)
from wire.layers import (
    AETH,
    MrcBTH,
    MrcCCState,
    MrcEPH,
    MrcImmDt,
    MrcMETH,
    MrcNETH,
    MrcRETH,
    MrcSETH,
    MrcTSETH,
    carries_icrc,
)

TSHARK = shutil.which("tshark")
pytestmark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed")

DISSECTOR = Path(wire.__file__).with_name("mrc.lua")

#: Lua field prefix of each layer: mrc.<prefix>.<scapy field name>.
LUA_PREFIX: dict[type[Packet], str] = {
    MrcBTH: "bth",
    MrcMETH: "meth",
    MrcTSETH: "tseth",
    MrcRETH: "reth",
    MrcImmDt: "immdt",
    AETH: "aeth",
    MrcSETH: "seth",
    MrcCCState: "cc_state",
    MrcNETH: "neth",
    MrcEPH: "eph",
}

EXTRA_FIELDS = [
    "mrc.icrc",
    "mrc.icrc.valid",
    "mrc.icrc.expected",
    "mrc.trimmed",
    "mrc.ev",
    "mrc.payload",
    "mrc.payload_length",
    "mrc.seth.ecn_echo",
    "mrc.neth.ecn_echo",
    "_ws.expert.message",
    "_ws.lua.text",
]


def lua_fields_of(frame: Packet) -> dict[str, int]:
    """What the dissector should show for ``frame``: every MRC header field, by Lua name."""
    expected: dict[str, int] = {}
    for layer_class, prefix in LUA_PREFIX.items():
        layer = frame.getlayer(layer_class)
        if layer is None:
            continue
        for field in layer.fields_desc:
            if field.name == "icrc":
                if carries_icrc(layer):
                    expected["mrc.icrc"] = int(layer.icrc)
                continue
            expected[f"mrc.{prefix}.{field.name}"] = int(layer.getfieldval(field.name))
    return expected


def all_lua_field_names() -> list[str]:
    names = {
        f"mrc.{prefix}.{field.name}"
        for layer_class, prefix in LUA_PREFIX.items()
        for field in layer_class.fields_desc
        if field.name != "icrc"
    }
    return sorted(names) + EXTRA_FIELDS


def tshark(pcap: Path, *arguments: str, with_dissector: bool = True) -> str:
    command = [str(TSHARK), "-n", "-r", str(pcap), *arguments]
    if with_dissector:
        command[1:1] = ["-X", f"lua_script:{DISSECTOR}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "Lua Error" not in result.stdout + result.stderr
    return result.stdout


def decoded(pcap: Path, fields: list[str], *, with_dissector: bool = True) -> list[dict]:
    """Per packet, the values tshark shows for ``fields`` (absent fields left out)."""
    arguments = ["-T", "json"]
    for field in fields:
        arguments += ["-e", field]
    packets = json.loads(tshark(pcap, *arguments, with_dissector=with_dissector))
    return [packet["_source"]["layers"] for packet in packets]


def as_int(values: list[str]) -> int:
    return int(values[0], 0)


@pytest.fixture(scope="module")
def capture(
    tmp_path_factory, sample_frames, randomise
) -> tuple[Path, list[tuple[str, Packet]], list[dict]]:
    """One capture of every case below, decoded once with the Lua dissector.

    Header fields carry random values, so a field the dissector reads from the wrong place
    cannot pass by being 0 on both sides.
    """
    rng = random.Random(2605)
    frames: list[tuple[str, Packet]] = []
    for label, frame in sample_frames:
        frames.append((label, Ether(bytes(randomise(frame, rng)))))
    v4 = Envelope(src_ip="10.0.0.1", dst_ip="10.0.0.2", ev=0x1234_0000)
    v6 = Envelope(src_ip="fd00::1", dst_ip="fd00::2", ev=0x1234_5678)
    data_v4 = mrc_data_packet(v4, dqpn=5, psn=77, payload=b"payload!", tx_ts=300)
    data_v6 = mrc_data_packet(
        v6, dqpn=5, psn=78, payload=b"payload!", opcode=Opcode.WRITE_ONLY_IMM, imm=9
    )
    corrupted = bytearray(bytes(data_v4))
    corrupted[-ICRC_LEN - 1] ^= 0xFF
    frames += [
        (
            "probe_answers",
            Ether(
                bytes(
                    mrc_ep_response(
                        v4,
                        dqpn=5,
                        ep_type=EpType.EV_PROBE,
                        seq=1,
                        value=0xC001_0000,
                        more_answers=[(2, 0xC002_0000), (3, 0xC003_0000)],
                    )
                )
            ),
        ),
        ("trimmed/ipv4", Ether(bytes(trim(data_v4)))),
        ("trimmed_lasthop/ipv6", Ether(bytes(trim(data_v6, last_hop=True)))),
        ("corrupted", Ether(bytes(corrupted))),
        (
            "ev_on_dns_port",
            Ether(
                bytes(
                    mrc_data_packet(
                        Envelope(src_ip="10.0.0.1", dst_ip="10.0.0.2", ev=53 << 16),
                        dqpn=6,
                        psn=8,
                        payload=b"x",
                    )
                )
            ),
        ),
        (
            "truncated_sack",
            Ether(
                bytes(
                    Ether(src=DEFAULT_SRC_MAC, dst=DEFAULT_DST_MAC)
                    / IP(src="10.0.0.1", dst="10.0.0.2")
                    / UDP(sport=1, dport=ROCEV2_UDP_PORT)
                    / Raw(bytes([Opcode.SACK]) + bytes(11) + bytes(10))
                )
            ),
        ),
    ]
    pcap = tmp_path_factory.mktemp("lua") / "mrc.pcap"
    wrpcap(str(pcap), [frame for _, frame in frames])
    return pcap, frames, decoded(pcap, all_lua_field_names())


def packet(capture, label: str) -> tuple[Packet, dict]:
    _, frames, decoded_packets = capture
    index = [name for name, _ in frames].index(label)
    return frames[index][1], decoded_packets[index]


def test_every_header_field_of_every_packet_kind_is_decoded_with_its_value(capture):
    _, frames, _ = capture
    for label, frame in frames:
        if not label.startswith(("ipv4/", "ipv6/")):
            continue
        _, shown = packet(capture, label)
        expected = lua_fields_of(frame)
        got = {name: as_int(shown[name]) for name in expected if name in shown}
        assert got == expected, label


def test_the_ev_payload_and_a_valid_icrc_are_shown(capture):
    _, frames, _ = capture
    for label, frame in frames:
        if not label.startswith(("ipv4/", "ipv6/")):
            continue
        _, shown = packet(capture, label)
        assert as_int(shown["mrc.ev"]) == ev_of(frame), label
        assert shown["mrc.icrc.valid"] == ["1"], label
        assert shown["mrc.trimmed"] == ["0"], label
        load = frame[Raw].load if frame.haslayer(Raw) else b""
        assert as_int(shown["mrc.payload_length"]) == len(load), label
        if load:
            assert shown["mrc.payload"] == [load.hex()], label


def test_an_ev_probe_response_shows_every_answer_it_carries(capture):
    _, shown = packet(capture, "probe_answers")
    assert [int(v, 0) for v in shown["mrc.eph.seq"]] == [1, 2, 3]
    assert [int(v, 0) for v in shown["mrc.eph.value"]] == [0xC001_0000, 0xC002_0000, 0xC003_0000]
    assert shown["mrc.icrc.valid"] == ["1"]
    assert "mrc.payload" not in shown


def test_the_ecn_echo_bit_of_sack_and_nack_is_named(capture):
    for family in ("ipv4", "ipv6"):
        sack, shown_sack = packet(capture, f"{family}/sack")
        nack, shown_nack = packet(capture, f"{family}/nack")
        assert as_int(shown_sack["mrc.seth.ecn_echo"]) == sack[MrcSETH].cc_flags & 1
        assert as_int(shown_nack["mrc.neth.ecn_echo"]) == nack[MrcNETH].cc_flags & 1


def test_a_trimmed_packet_shows_its_headers_and_neither_payload_nor_icrc(capture):
    for label in ("trimmed/ipv4", "trimmed_lasthop/ipv6"):
        frame, shown = packet(capture, label)
        assert shown["mrc.trimmed"] == ["1"], label
        assert as_int(shown["mrc.bth.psn"]) == frame[MrcBTH].psn
        assert as_int(shown["mrc.reth.dma_length"]) == frame[MrcRETH].dma_length
        assert "mrc.icrc" not in shown
        assert "mrc.payload" not in shown
        assert as_int(shown["mrc.payload_length"]) == 0
    _, shown_v6 = packet(capture, "trimmed_lasthop/ipv6")
    assert as_int(shown_v6["mrc.immdt.imm"]) == 9


def test_a_corrupted_packet_is_flagged_with_the_icrc_it_should_carry(capture):
    frame, shown = packet(capture, "corrupted")
    assert shown["mrc.icrc.valid"] == ["0"]
    assert as_int(shown["mrc.icrc"]) == frame[MrcBTH].icrc
    assert as_int(shown["mrc.icrc.expected"]) != frame[MrcBTH].icrc
    assert any("Bad ICRC" in message for message in shown["_ws.expert.message"])


def test_mrc_is_decoded_even_when_its_ev_source_port_belongs_to_another_protocol(capture):
    frame, shown = packet(capture, "ev_on_dns_port")
    assert as_int(shown["mrc.bth.psn"]) == 8
    assert as_int(shown["mrc.ev"]) == 53 << 16
    assert shown["mrc.icrc.valid"] == ["1"]
    assert frame[UDP].sport == 53


def test_a_truncated_packet_is_marked_malformed_instead_of_raising_a_lua_error(capture):
    _, shown = packet(capture, "truncated_sack")
    assert as_int(shown["mrc.bth.opcode"]) == Opcode.SACK
    assert "mrc.seth.cum_ack_psn" not in shown
    assert any("SETH needs 28 bytes" in message for message in shown["_ws.expert.message"])


def test_verbose_output_shows_each_header_field_by_field(capture):
    pcap, _, _ = capture
    sack, _ = packet(capture, "ipv4/sack")
    text = tshark(pcap, "-V", "-Y", f"mrc.seth.cum_ack_psn == {sack[MrcSETH].cum_ack_psn}")
    assert "MRC (Multipath Reliable Connection) over RoCEv2" in text
    for header in ("BTH", "SETH", "CC_STATE"):
        assert f"\n    {header}\n" in text, header
    assert f"Cumulative ack PSN: {sack[MrcSETH].cum_ack_psn}" in text
    assert f"SACK bitmap: 0x{sack[MrcSETH].sack_bitmap:016x}" in text


def test_wiresharks_own_rocev2_dissector_reads_opcode_qp_and_psn_of_every_packet(capture):
    pcap, frames, _ = capture
    fields = ["infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn"]
    standard = decoded(pcap, fields, with_dissector=False)
    for (label, frame), shown in zip(frames, standard, strict=True):
        if label in {"truncated_sack", "ev_on_dns_port"}:  # no BTH; DNS claims port 53
            continue
        bth = frame[MrcBTH]
        assert as_int(shown["infiniband.bth.opcode"]) == bth.opcode, label
        assert as_int(shown["infiniband.bth.destqp"]) == bth.dqpn, label
        assert as_int(shown["infiniband.bth.psn"]) == bth.psn, label


def test_an_srv6_carrier_shows_its_block_and_usid_list(tmp_path: Path) -> None:
    from ipaddress import IPv6Network

    from scapy.layers.inet6 import IPv6
    from scapy.utils import wrpcap

    from wire import srv6

    inner = IPv6(src="fd00:0:1::1", dst="fd00:0:2::1") / UDP(sport=49152, dport=4791)
    block = IPv6Network("fcbb:bb00::/32")
    frame = Ether(dst="02:00:00:00:00:01") / srv6.encapsulate(
        inner, src="fd00:0:1::1", block=block, usids=[1, 4, 2]
    )
    pcap = tmp_path / "srv6.pcap"
    wrpcap(str(pcap), [frame])
    fields = ["mrc_srv6.block", "mrc_srv6.active", "mrc_srv6.usid", "mrc_srv6.count"]
    (layers,) = decoded(pcap, fields)
    assert layers["mrc_srv6.block"] == ["fcbb:bb00::/32"]
    assert [int(v, 0) for v in layers["mrc_srv6.usid"]] == [1, 4, 2]
    assert int(layers["mrc_srv6.active"][0], 0) == 1
    assert int(layers["mrc_srv6.count"][0], 0) == 3
