"""A capture of a RoCE transfer decodes as standard RoCEv2: Wireshark's InfiniBand dissector
reads every packet (WRITE FIRST / MIDDLE / LAST with RETH on the first, ACKs with AETH), the
MRC Lua dissector leaves them alone, and every ICRC is right (checked with the scapy layers).

tcpdump records the receiver's veth while ``mrc-agent send --transport roce`` runs between
two namespaces. Needs root, tcpdump and tshark; skips without them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scapy.error import Scapy_Exception
from scapy.layers.inet import UDP
from scapy.utils import rdpcap

from tests.e2e.agent.agent_lab import AGENT, AgentLab
from wire.constants import RoceOpcode
from wire.layers import BTH, RoceRETH, icrc_matches

REPO = Path(__file__).resolve().parents[3]
DISSECTOR = REPO / "wire" / "mrc.lua"
FILE_BYTES = 300_000


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, raw sockets): run with sudo"
    missing = [tool for tool in ("tcpdump", "tshark") if shutil.which(tool) is None]
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


def _wait_for_the_last_ack(pcap: Path, deadline_s: float = 20.0) -> None:
    """Until the capture holds the ACK of the newest data packet: the sender exited once it
    had it, but tcpdump may still be writing it."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            frames = [frame for frame in rdpcap(str(pcap)) if frame.haslayer(BTH)]
        except (OSError, Scapy_Exception):  # no whole header written yet: look again
            frames = []
        data = [f[BTH].psn for f in frames if f[BTH].opcode != RoceOpcode.RC_ACKNOWLEDGE]
        acks = {f[BTH].psn for f in frames if f[BTH].opcode == RoceOpcode.RC_ACKNOWLEDGE}
        if data and data[-1] in acks:
            return
        time.sleep(0.05)
    raise AssertionError(f"the capture never showed the last ACK within {deadline_s} s")


def test_a_roce_transfer_decodes_as_infiniband_with_valid_icrcs(lab, tmp_path):
    out_dir = tmp_path / "received"
    lab.serve("rx", "--out-dir", str(out_dir), "--no-socket")
    source = tmp_path / "payload.bin"
    source.write_bytes(os.urandom(FILE_BYTES))
    pcap = tmp_path / "roce.pcap"
    tcpdump = lab.capture(pcap)
    try:
        sent = lab.run(
            "tx",
            [*AGENT, "send", str(source), "--to", lab.addresses["rx"], "--no-agent",
             "--transport", "roce", "--message-size", "64K"],
        )  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        _wait_for_the_last_ack(pcap)
    finally:
        tcpdump.send_signal(signal.SIGTERM)
        tcpdump.wait(timeout=10)
    frames = [frame for frame in rdpcap(str(pcap)) if UDP in frame]
    assert frames and all(frame.haslayer(BTH) for frame in frames)
    assert all(icrc_matches(frame) for frame in frames)
    firsts = [f for f in frames if f[BTH].opcode == RoceOpcode.RC_RDMA_WRITE_FIRST]
    assert len(firsts) == -(-FILE_BYTES // (64 * 1024))
    assert all(f.haslayer(RoceRETH) for f in firsts)

    fields = ["infiniband.bth.opcode", "infiniband.reth.dmalen", "infiniband.aeth.syndrome",
              "infiniband.bth.psn", "mrc.bth.opcode"]  # fmt: skip
    command = ["tshark", "-n", "-X", f"lua_script:{DISSECTOR}", "-r", str(pcap), "-T", "json"]
    for field in fields:
        command += ["-e", field]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "Lua Error" not in result.stdout + result.stderr
    packets = [packet["_source"]["layers"] for packet in json.loads(result.stdout)]
    assert len(packets) == len(frames)
    assert all("infiniband.bth.opcode" in p and "mrc.bth.opcode" not in p for p in packets)
    opcodes = {int(p["infiniband.bth.opcode"][0]) for p in packets}
    assert {RoceOpcode.RC_RDMA_WRITE_FIRST, RoceOpcode.RC_RDMA_WRITE_MIDDLE,
            RoceOpcode.RC_ACKNOWLEDGE} <= opcodes  # fmt: skip
    lengths = [
        int(p["infiniband.reth.dmalen"][0]) for p in packets if "infiniband.reth.dmalen" in p
    ]
    assert sum(lengths) >= FILE_BYTES
    syndromes = [
        p["infiniband.aeth.syndrome"][0] for p in packets if "infiniband.aeth.syndrome" in p
    ]
    assert syndromes  # the responder's ACKs, decoded with their AETH
