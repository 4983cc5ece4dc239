"""The Wireshark Lua dissector reads a capture of the agent's own traffic, field by field.

A file goes from one agent to another in two namespaces while tcpdump records the receiver's
veth; tshark with wire/mrc.lua must then decode every MRC packet of that capture: data
packets with METH and RETH whose virtual addresses cover the file, SACKs with SETH and CC_STATE,
and a valid ICRC on every untrimmed packet.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from tests.e2e.agent.agent_lab import AGENT, AgentLab
from wire.constants import DEFAULT_PAYLOAD, ROCEV2_UDP_PORT, Opcode

REPO = Path(__file__).resolve().parents[3]
DISSECTOR = REPO / "wire" / "mrc.lua"
TOOLS = ("tcpdump", "tshark")
#: The file sent, and the data packets it takes at least (DEFAULT_PAYLOAD bytes a packet).
FILE_BYTES = 200_000
DATA_PACKETS = FILE_BYTES // DEFAULT_PAYLOAD


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, raw sockets): run with sudo"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    return f"missing tools: {', '.join(missing)}" if missing else None


pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or ""),
]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[AgentLab]:
    lab = AgentLab(tmp_path)
    try:
        yield lab
    finally:
        lab.close()


def _captured_opcodes(pcap: Path) -> list[int]:
    """The BTH opcode of every UDP 4791 frame tcpdump has written so far (``-U``: a packet at
    a time; a record still being written at the end is left for the next look)."""
    data = pcap.read_bytes() if pcap.exists() else b""
    if len(data) < 24:
        return []
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    opcodes, offset = [], 24
    while offset + 16 <= len(data):
        (length,) = struct.unpack_from(f"{order}I", data, offset + 8)
        frame = data[offset + 16 : offset + 16 + length]
        if len(frame) < length:
            break
        offset += 16 + length
        packet = Ether(frame)
        if UDP in packet and packet[UDP].dport == ROCEV2_UDP_PORT:
            payload = bytes(packet[UDP].payload)
            if payload:
                opcodes.append(payload[0])
    return opcodes


def _wait_for_capture(pcap: Path, data_packets: int, deadline_s: float = 30.0) -> None:
    """Return once the capture holds ``data_packets`` data packets and a SACK (or after
    ``deadline_s``, generous: the assertions that follow then say what is missing)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        opcodes = _captured_opcodes(pcap)
        data = sum(1 for op in opcodes if 0xC6 <= op <= 0xCB)
        if data >= data_packets and Opcode.SACK in opcodes:
            return
        time.sleep(0.1)


def _decode(pcap: Path, fields: list[str]) -> list[dict[str, list[str]]]:
    command = ["tshark", "-n", "-X", f"lua_script:{DISSECTOR}", "-r", str(pcap), "-T", "json"]
    for field in fields:
        command += ["-e", field]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "Lua Error" not in result.stdout + result.stderr
    return [packet["_source"]["layers"] for packet in json.loads(result.stdout)]


def test_tshark_decodes_every_mrc_header_of_a_real_agent_transfer(lab, tmp_path):
    out_dir = tmp_path / "received"
    lab.serve("rx", "--out-dir", str(out_dir), "--socket", str(tmp_path / "rx.sock"))
    source = tmp_path / "payload.bin"
    source.write_bytes(os.urandom(FILE_BYTES))
    pcap = tmp_path / "agent.pcap"
    tcpdump = lab.capture(pcap)
    try:
        sent = lab.run(
            "tx", [*AGENT, "send", str(source), "--to", lab.addresses["rx"], "--no-agent"]
        )
        assert sent.returncode == 0, sent.stderr
        # tcpdump may still hold the last packets of the transfer: stop it once it wrote them.
        _wait_for_capture(pcap, DATA_PACKETS)
    finally:
        tcpdump.send_signal(signal.SIGTERM)
        tcpdump.communicate(timeout=10)
    assert (out_dir / "payload.bin").read_bytes() == source.read_bytes()

    packets = _decode(
        pcap,
        [
            "mrc.bth.opcode",
            "mrc.bth.psn",
            "mrc.meth.msn",
            "mrc.reth.va",
            "mrc.reth.rkey",
            "mrc.reth.dma_length",
            "mrc.seth.cum_ack_psn",
            "mrc.cc_state.received_bytes",
            "mrc.icrc.valid",
        ],
    )
    assert packets, "the capture holds MRC packets"
    opcodes = [int(p["mrc.bth.opcode"][0], 0) for p in packets]
    data = [p for p, op in zip(packets, opcodes, strict=True) if 0xC6 <= op <= 0xCB]
    sacks = [p for p, op in zip(packets, opcodes, strict=True) if op == Opcode.SACK]
    assert len(data) >= DATA_PACKETS, "every data packet decoded"
    assert all("mrc.reth.va" in p and "mrc.meth.msn" in p for p in data)
    assert all(int(p["mrc.reth.rkey"][0], 0) != 0 for p in data), "R_Key shown"
    assert sacks and all("mrc.seth.cum_ack_psn" in p for p in sacks)
    assert all("mrc.cc_state.received_bytes" in p for p in sacks), "CC_STATE after SETH"
    assert all(p["mrc.icrc.valid"] == ["1"] for p in packets), "the agent's ICRCs check out"
