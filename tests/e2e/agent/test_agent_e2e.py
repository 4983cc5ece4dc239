"""The agent as a user runs it: processes in two network namespaces joined by a veth.

Needs root (namespaces, raw sockets) and skips without it. Every namespace, veth, nftables
rule and process is removed after each test, whatever happened (the fixture checks).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.agent.agent_lab import AGENT, PERF, AgentLab
from tools.netns_processes import Background
from tools.veth_loss import add_random_loss, random_loss_drops


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, raw sockets): run with sudo"
    missing = [tool for tool in ("ip", "ethtool", "nft", "sysctl") if shutil.which(tool) is None]
    return f"missing tools: {', '.join(missing)}" if missing else None


pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or ""),
]


def _lab(tmp_path: Path, ipv6: bool, second_plane: bool = False) -> Iterator[AgentLab]:
    lab = AgentLab(tmp_path, ipv6=ipv6, second_plane=second_plane)
    processes = lab.processes
    try:
        yield lab
    finally:
        started = list(processes)
        lab.close()
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert lab.lab.prefix not in names, f"namespaces left behind: {names}"
        assert all(p.proc.poll() is not None for p in started), "a process outlived its test"


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[AgentLab]:
    yield from _lab(tmp_path, ipv6=False)


@pytest.fixture
def lab6(tmp_path: Path) -> Iterator[AgentLab]:
    yield from _lab(tmp_path, ipv6=True)


@pytest.fixture
def lab2(tmp_path: Path) -> Iterator[AgentLab]:
    yield from _lab(tmp_path, ipv6=False, second_plane=True)


def _file(tmp_path: Path, size: int, name: str = "payload.bin") -> Path:
    path = tmp_path / name
    path.write_bytes(os.urandom(size))
    return path


def _send_command(lab: AgentLab, source: Path, *extra: str) -> list[str]:
    return [*AGENT, "send", str(source), "--to", lab.addresses["rx"], *extra]


def _receiver(lab: AgentLab, tmp_path: Path) -> Path:
    out_dir = tmp_path / "received"
    lab.serve("rx", "--out-dir", str(out_dir), "--socket", str(tmp_path / "rx.sock"))
    return out_dir


def test_a_file_sent_through_the_hosts_agent_arrives_byte_identical(lab, tmp_path):
    out_dir = _receiver(lab, tmp_path)
    socket_path = str(tmp_path / "tx.sock")
    lab.serve("tx", "--socket", socket_path)
    source = _file(tmp_path, 3_000_000)
    sent = lab.run("tx", _send_command(lab, source, "--socket", socket_path))
    assert sent.returncode == 0, sent.stderr
    assert (out_dir / "payload.bin").read_bytes() == source.read_bytes()
    assert f"stored as {out_dir / 'payload.bin'}" in sent.stdout


def test_a_file_survives_five_percent_loss_each_way_byte_identical(lab, tmp_path):
    out_dir = _receiver(lab, tmp_path)
    add_random_loss(lab.pair.rx_ns, 5.0)
    add_random_loss(lab.pair.tx_ns, 5.0)
    source = _file(tmp_path, 2_000_000)
    sent = lab.run("tx", _send_command(lab, source, "--no-agent", "--json"), timeout=120)
    assert sent.returncode == 0, sent.stderr
    assert (out_dir / "payload.bin").read_bytes() == source.read_bytes()
    assert random_loss_drops(lab.pair.rx_ns) > 0
    assert json.loads(sent.stdout)["connection"]["retransmits_total"] > 0


def test_a_file_over_ipv6_arrives_byte_identical(lab6, tmp_path):
    out_dir = _receiver(lab6, tmp_path)
    source = _file(tmp_path, 500_000)
    sent = lab6.run("tx", _send_command(lab6, source, "--no-agent"))
    assert sent.returncode == 0, sent.stderr
    assert (out_dir / "payload.bin").read_bytes() == source.read_bytes()


def _sniffed(lab: AgentLab, side: str, action: list[str]) -> list[dict]:
    """The MRC packets seen on ``side``'s veth while ``action`` ran on tx."""
    ifname = lab.pair.rx_if if side == "rx" else lab.pair.tx_if
    sniffer = lab.start(
        side, [sys.executable, "-m", "tests.e2e.agent.sniff", ifname, "120"], "sniffing"
    )
    done = lab.run("tx", action)
    assert done.returncode == 0, done.stderr
    sniffer.proc.send_signal(signal.SIGTERM)
    output, _errors = sniffer.proc.communicate(timeout=30)
    return json.loads(output.decode().strip().splitlines()[-1])


def test_data_leaves_with_id_0_df_trimmable_dscp_ect0_and_many_ev_ports(lab, tmp_path):
    _receiver(lab, tmp_path)
    source = _file(tmp_path, 1_000_000)
    packets = _sniffed(lab, "rx", _send_command(lab, source, "--no-agent"))
    data = [p for p in packets if not p["outgoing"] and 0xC6 <= p["opcode"] <= 0xCB]
    control = [p for p in packets if p["outgoing"] and p["opcode"] in (0xD1, 0xDC, 0xDD)]
    assert len(data) >= 1_000_000 // 1024  # every data packet (the sniffer drains its socket)
    assert control
    for packet in data:
        assert packet["ip_id"] == 0 and packet["df"] is True
        assert packet["dscp"] in (4, 5) and packet["ecn"] == 2  # trimmable (retx) + ECT(0)
        assert packet["dport"] == 4791 and 0xC000 <= packet["sport"] <= 0xFFFF
    assert len({p["sport"] for p in data}) >= 128  # sprayed over the EV set
    for packet in control:
        assert packet["dscp"] == 46 and packet["ecn"] == 0 and packet["ip_id"] == 0


def test_a_fabrics_dscp_values_given_with_dscp_mark_data_and_control(lab, tmp_path):
    dscp = "trimmable=20,trimmable_retx=21,control=40"
    out_dir = tmp_path / "received"
    lab.serve("rx", "--out-dir", str(out_dir), "--no-socket", "--dscp", dscp)
    source = _file(tmp_path, 300_000)
    packets = _sniffed(lab, "rx", _send_command(lab, source, "--no-agent", "--dscp", dscp))
    data = [p for p in packets if not p["outgoing"] and 0xC6 <= p["opcode"] <= 0xCB]
    control = [p for p in packets if p["outgoing"] and p["opcode"] in (0xD1, 0xDC, 0xDD)]
    assert data and control
    assert {p["dscp"] for p in data} <= {20, 21}
    assert {p["dscp"] for p in control} == {40}
    assert (out_dir / "payload.bin").read_bytes() == source.read_bytes()


def test_a_dscp_value_shared_by_two_classes_is_refused_with_exit_2(lab, tmp_path):
    refused = lab.run(
        "tx", [*AGENT, "serve", "--plane", lab.addresses["tx"], "--dscp", "control=4"]
    )
    assert refused.returncode == 2
    assert "DSCP value 4 is used by both 'trimmable' and 'control'" in refused.stderr


def test_over_ipv6_the_flow_label_varies_with_the_ev(lab6, tmp_path):
    _receiver(lab6, tmp_path)
    source = _file(tmp_path, 400_000)
    packets = _sniffed(lab6, "rx", _send_command(lab6, source, "--no-agent"))
    data = [p for p in packets if not p["outgoing"] and 0xC6 <= p["opcode"] <= 0xCB]
    assert data and all(p["ip"] == 6 and p["ecn"] == 2 for p in data)
    assert len({p["flow_label"] for p in data}) >= 64


def test_mrc_perf_measures_between_namespaces_and_evs_1_uses_a_single_path(lab, tmp_path):
    lab.start("rx", [*PERF, "--server", "--plane", lab.addresses["rx"]], "server ready")
    perf = [*PERF, "--to", lab.addresses["rx"], "--json", "--no-agent"]
    spray = lab.run("tx", [*perf, "--bytes", "2M"])
    assert spray.returncode == 0, spray.stderr
    result = json.loads(spray.stdout)
    assert result["bytes"] == 2 << 20 and result["goodput_bps"] > 0
    assert result["receiver"]["bytes_received"] == 2 << 20
    single = lab.run("tx", [*perf, "--bytes", "1M", "--evs", "1"])
    assert single.returncode == 0, single.stderr
    used = [ev for ev in json.loads(single.stdout)["connection"]["evs"] if ev["uses"]]
    assert len(used) == 1


def test_a_second_agent_is_refused_port_4791_with_exit_3(lab, tmp_path):
    lab.serve("tx", "--socket", str(tmp_path / "tx.sock"))
    second = lab.run("tx", [*AGENT, "serve", "--plane", lab.addresses["tx"], "--no-socket"])
    assert second.returncode == 3
    assert "UDP port 4791 (IPv4) is already in use" in second.stderr


def test_any_process_holding_udp_4791_makes_send_exit_3(lab, tmp_path):
    hold_port = (
        "import socket, time\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "s.bind(('0.0.0.0', 4791))\n"
        "print('bound', flush=True)\n"
        "time.sleep(60)\n"
    )
    holder = lab.start("tx", [sys.executable, "-c", hold_port], "bound")
    source = _file(tmp_path, 1000)
    sent = lab.run("tx", _send_command(lab, source, "--no-agent"))
    assert sent.returncode == 3
    assert sent.stderr.startswith("mrc-agent: error: UDP port 4791")
    holder.stop()


def test_a_peer_without_an_agent_is_refused_with_exit_4(lab, tmp_path):
    source = _file(tmp_path, 1000)
    sent = lab.run("tx", _send_command(lab, source, "--no-agent"))
    assert sent.returncode == 4
    assert "connection refused" in sent.stderr


def test_a_peer_address_nobody_has_is_unreachable_with_exit_4(lab, tmp_path):
    source = _file(tmp_path, 1000)
    sent = lab.run("tx", [*AGENT, "send", str(source), "--to", "10.251.0.99", "--no-agent"])
    assert sent.returncode == 4
    assert "unreachable" in sent.stderr


def test_an_agent_stops_on_sigterm_with_exit_0_and_removes_its_socket(lab, tmp_path):
    socket_path = tmp_path / "tx.sock"
    agent: Background = lab.serve("tx", "--socket", str(socket_path))
    assert socket_path.exists()
    agent.proc.send_signal(signal.SIGTERM)
    assert agent.proc.wait(timeout=10) == 0
    assert not socket_path.exists()


def test_a_flood_of_malformed_datagrams_is_counted_and_the_agent_keeps_serving(lab, tmp_path):
    out_dir = _receiver(lab, tmp_path)
    garbage = (
        "import os, random, socket\n"
        "rng = random.Random(1)\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "for size in [0, 1, 11, 12, 15, 16, 40, 60, 1100, 1500] * 50:\n"
        "    body = bytes([rng.choice([0xC6, 0xCA, 0xDC, 0xDD, 0xD1, 0xDE, 0x00])])\n"
        "    s.sendto((body + os.urandom(size))[:size], ({!r}, 4791))\n"
    ).format(lab.addresses["rx"])
    flood = lab.run("tx", [sys.executable, "-c", garbage])
    assert flood.returncode == 0, flood.stderr
    source = _file(tmp_path, 300_000)
    sent = lab.run("tx", _send_command(lab, source, "--no-agent"))
    assert sent.returncode == 0, sent.stderr
    assert (out_dir / "payload.bin").read_bytes() == source.read_bytes()
    status = lab.run("rx", [*AGENT, "status", "--socket", str(tmp_path / "rx.sock")])
    assert status.returncode == 0, status.stderr
    drops = json.loads(status.stdout)["core_drops"]
    assert sum(drops.values()) >= 450  # the 50 empty datagrams may be counted below the core


def test_two_planes_share_a_transfer_and_each_carries_part_of_it(lab2, tmp_path):
    out_dir = tmp_path / "received"
    planes_rx = ["--plane", lab2.addresses["rx"], "--plane", lab2.plane1["rx"]]
    planes_tx = ["--plane", lab2.addresses["tx"], "--plane", lab2.plane1["tx"]]
    serve = [*AGENT, "serve", *planes_rx, "--out-dir", str(out_dir), "--no-socket"]
    lab2.start("rx", serve, "ready")
    before = [lab2.rx_packets("rx", lab2.pair.rx_if), lab2.rx_packets("rx", lab2.plane1["rx_if"])]
    source = _file(tmp_path, 2_000_000)
    sent = lab2.run("tx", _send_command(lab2, source, "--no-agent", *planes_tx))
    assert sent.returncode == 0, sent.stderr
    assert (out_dir / "payload.bin").read_bytes() == source.read_bytes()
    after = [lab2.rx_packets("rx", lab2.pair.rx_if), lab2.rx_packets("rx", lab2.plane1["rx_if"])]
    carried = [b - a for a, b in zip(before, after, strict=True)]
    assert all(count > 500 for count in carried), carried  # ~2000 data packets, split evenly


def _mark_ce(netns: str, percent: int) -> None:
    """Set CE on ``percent`` % of the MRC packets entering ``netns`` (a congested switch)."""
    rule = (
        "table inet mrc_test_ecn {\n"
        "  chain prerouting {\n"
        "    type filter hook prerouting priority raw; policy accept;\n"
        f"    udp dport 4791 numgen random mod 100 < {percent} ip ecn set ce\n"
        "  }\n"
        "}\n"
    )
    subprocess.run(
        ["ip", "netns", "exec", netns, "nft", "-f", "-"], input=rule, text=True, check=True
    )


def test_ce_marks_are_read_at_the_receiver_and_echoed_to_the_sender(lab, tmp_path):
    lab.start("rx", [*PERF, "--server", "--plane", lab.addresses["rx"]], "server ready")
    _mark_ce(lab.pair.rx_ns, 10)
    run = lab.run(
        "tx", [*PERF, "--to", lab.addresses["rx"], "--bytes", "1M", "--json", "--no-agent"]
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    marks = result["receiver"]["connection"]["ecn_marks_received"]
    assert 50 <= marks <= 250  # about 10 % of ~1000 data packets
    assert result["connection"]["ecn_echoes"] > 0


# --- who may call, and what they may ask ------------------------------------------------------


def _secret(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_with_a_secret_file_only_a_sender_holding_the_same_secret_is_served(lab, tmp_path):
    secret = _secret(tmp_path, "lab.secret", "a lab secret of thirty-two bytes")
    out_dir = tmp_path / "received"
    lab.serve("rx", "--out-dir", str(out_dir), "--no-socket", "--secret-file", str(secret))
    source = _file(tmp_path, 200_000)
    signed = lab.run("tx", _send_command(lab, source, "--no-agent", "--secret-file", str(secret)))
    assert signed.returncode == 0, signed.stderr
    assert (out_dir / "payload.bin").read_bytes() == source.read_bytes()
    unsigned = lab.run("tx", _send_command(lab, source, "--no-agent", "--name", "unsigned.bin"))
    assert unsigned.returncode == 9, unsigned.stderr
    assert "requires authenticated hellos (--secret-file)" in unsigned.stderr
    wrong = _secret(tmp_path, "wrong.secret", "another secret, also long enough")
    forged = lab.run(
        "tx", _send_command(lab, source, "--no-agent", "--secret-file", str(wrong), "--name", "x")
    )
    assert forged.returncode == 9, forged.stderr
    assert sorted(p.name for p in out_dir.iterdir()) == ["payload.bin"]


def test_a_secret_file_others_can_read_is_refused_at_start(lab, tmp_path):
    secret = tmp_path / "open.secret"
    secret.write_text("a lab secret of thirty-two bytes")
    secret.chmod(0o644)
    started = lab.run(
        "rx", [*AGENT, "serve", "--plane", lab.addresses["rx"], "--secret-file", str(secret)]
    )
    assert started.returncode == 2
    assert "chmod 600" in started.stderr


def test_a_caller_outside_allow_is_refused_with_exit_9(lab, tmp_path):
    lab.serve("rx", "--out-dir", str(tmp_path / "in"), "--no-socket", "--allow", "10.9.0.0/16")
    sent = lab.run("tx", _send_command(lab, _file(tmp_path, 1000), "--no-agent"))
    assert sent.returncode == 9
    assert "--allow" in sent.stderr


def test_a_transfer_over_the_receivers_max_region_exits_8_naming_the_flag(lab, tmp_path):
    out_dir = tmp_path / "in"
    lab.serve("rx", "--out-dir", str(out_dir), "--no-socket", "--max-region", "100000")
    sent = lab.run("tx", _send_command(lab, _file(tmp_path, 200_000), "--no-agent"))
    assert sent.returncode == 8
    assert "--max-region" in sent.stderr
    assert list(out_dir.iterdir()) == []


def test_the_side_channel_listens_on_the_plane_address_only(lab, tmp_path):
    lab.serve("rx", "--no-socket")
    listening = lab.run("rx", ["ss", "-Htln", "sport = :18515"])
    assert listening.returncode == 0, listening.stderr
    assert f"{lab.addresses['rx']}:18515" in listening.stdout
    assert "0.0.0.0:18515" not in listening.stdout and "*:18515" not in listening.stdout
