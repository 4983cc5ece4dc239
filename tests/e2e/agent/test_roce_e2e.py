"""The RoCE baseline as a user runs it: ``mrc-agent send --transport roce`` between two
network namespaces, on one path in RoCE's classes; and with the path blackholed (nftables
drops every UDP datagram into the receiver), a transfer that fails after its retries with
exit 5, the way a training job stops.

Needs root (namespaces, raw sockets) and skips without it; every namespace, rule and process
is removed after each test, whatever happened.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostenv.netns import run
from tests.e2e.agent.agent_lab import AGENT, PERF, AgentLab
from tools.veth_loss import add_random_loss, random_loss_drops
from wire.constants import ROCE_DATA_OPCODES, RoceDscp, RoceOpcode


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, raw sockets): run with sudo"
    missing = [tool for tool in ("ip", "ethtool", "nft", "sysctl") if shutil.which(tool) is None]
    return f"missing tools: {', '.join(missing)}" if missing else None


pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or ""),
]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[AgentLab]:
    lab = AgentLab(tmp_path)
    started = lab.processes
    try:
        yield lab
    finally:
        processes = list(started)
        lab.close()
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert lab.lab.prefix not in names, f"namespaces left behind: {names}"
        assert all(p.proc.poll() is not None for p in processes), "a process outlived its test"


def _file(tmp_path: Path, size: int) -> Path:
    path = tmp_path / "payload.bin"
    path.write_bytes(os.urandom(size))
    return path


def _receiver(lab: AgentLab, tmp_path: Path) -> Path:
    out_dir = tmp_path / "received"
    lab.serve("rx", "--out-dir", str(out_dir), "--socket", str(tmp_path / "rx.sock"))
    return out_dir


def _blackhole(netns: str) -> None:
    """Drop every datagram to UDP 4791 entering ``netns`` (the side channel's TCP passes)."""
    ruleset = (
        "table inet roce_blackhole {\n"
        "  chain prerouting {\n"
        "    type filter hook prerouting priority raw; policy accept;\n"
        "    udp dport 4791 counter drop\n"
        "  }\n"
        "}\n"
    )
    done = subprocess.run(
        ["ip", "netns", "exec", netns, "nft", "-f", "-"],
        input=ruleset, capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def _blackholed(netns: str) -> int:
    text = run(["nft", "list", "table", "inet", "roce_blackhole"], netns=netns)
    match = re.search(r"counter packets (\d+)", text)
    return int(match.group(1)) if match else 0


def _send(lab: AgentLab, source: Path, *extra: str) -> list[str]:
    return [*AGENT, "send", str(source), "--to", lab.addresses["rx"], "--transport", "roce",
            *extra]  # fmt: skip


def test_a_file_over_roce_arrives_byte_identical_on_one_path_in_roces_classes(lab, tmp_path):
    out_dir = _receiver(lab, tmp_path)
    source = _file(tmp_path, 1_000_000)
    sniffer = lab.start(
        "rx", [sys.executable, "-m", "tests.e2e.agent.sniff", lab.pair.rx_if, "120"], "sniffing"
    )
    sent = lab.run("tx", _send(lab, source, "--no-agent", "--json"))
    sniffer.proc.send_signal(signal.SIGTERM)
    output, _ = sniffer.proc.communicate(timeout=30)
    assert sent.returncode == 0, sent.stderr
    assert (out_dir / "payload.bin").read_bytes() == source.read_bytes()
    result = json.loads(sent.stdout)
    assert result["transport"] == "roce" and result["roce"]["state"] == "RTS"
    packets = json.loads(output.decode().strip().splitlines()[-1])
    data = [p for p in packets if not p["outgoing"] and p["opcode"] in ROCE_DATA_OPCODES]
    acks = [p for p in packets if p["outgoing"] and p["opcode"] == RoceOpcode.RC_ACKNOWLEDGE]
    assert len(data) >= 1_000_000 // 1024 and acks
    assert {p["sport"] for p in data} == {result["roce"]["source_port"]}  # one path
    assert {(p["dscp"], p["ecn"]) for p in data} == {(RoceDscp.DATA, 2)}  # ECT(0)
    assert {(p["dscp"], p["ecn"]) for p in acks} == {(RoceDscp.ACK, 0)}
    assert len({p["sport"] for p in acks}) == 1


def test_a_roce_transfer_through_the_hosts_agent_survives_loss(lab, tmp_path):
    out_dir = _receiver(lab, tmp_path)
    socket_path = str(tmp_path / "tx.sock")
    lab.serve("tx", "--socket", socket_path)
    add_random_loss(lab.pair.rx_ns, 1.0)
    source = _file(tmp_path, 1_000_000)
    sent = lab.run("tx", _send(lab, source, "--socket", socket_path, "--json"), timeout=120)
    assert sent.returncode == 0, sent.stderr
    assert (out_dir / "payload.bin").read_bytes() == source.read_bytes()
    assert random_loss_drops(lab.pair.rx_ns) > 0
    result = json.loads(sent.stdout)
    assert result["transport"] == "roce" and result["roce"]["go_backs"] > 0


@pytest.mark.parametrize("through_agent", [False, True], ids=["own-endpoint", "host-agent"])
def test_a_blackholed_path_fails_the_transfer_after_its_retries_with_exit_5(
    lab, tmp_path, through_agent
):
    out_dir = _receiver(lab, tmp_path)
    extra = ["--no-agent"]
    if through_agent:
        socket_path = str(tmp_path / "tx.sock")
        lab.serve("tx", "--socket", socket_path)
        extra = ["--socket", socket_path]
    _blackhole(lab.pair.rx_ns)
    source = _file(tmp_path, 200_000)
    started = time.monotonic()
    sent = lab.run("tx", _send(lab, source, *extra, "--roce-timeout", "12"))
    elapsed = time.monotonic() - started
    assert sent.returncode == 5, sent.stderr
    assert "QP entered the error state" in sent.stderr
    assert "retry_cnt=7" in sent.stderr and "IBV_WC_RETRY_EXC_ERR" in sent.stderr
    # eight local ACK timeouts of 4.096 us x 2^12 (16.8 ms) come first: no fail-fast
    assert elapsed >= 8 * 4.096e-6 * 2**12
    assert _blackholed(lab.pair.rx_ns) > 0
    assert not (out_dir / "payload.bin").exists()


def test_mrc_perf_over_roce_and_single_between_namespaces(lab, tmp_path):
    lab.start("rx", [*PERF, "--server", "--plane", lab.addresses["rx"]], "server ready")
    perf = [*PERF, "--to", lab.addresses["rx"], "--json", "--no-agent", "--bytes", "1M"]
    for transport, evs in (("roce", 1), ("single", 1)):
        done = lab.run("tx", [*perf, "--transport", transport])
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert (result["transport"], result["evs"]) == (transport, evs)
        assert result["receiver"]["bytes_received"] == 1 << 20
