"""The host API end to end: two agents in namespaces joined by a veth, and each example of
``examples/api/`` run against them as a user would run it.

What is checked: WRITE with immediate completes with the right immediate and bytes; an
explicit profile's denied EV carries no packet afterwards (a capture on the veth shows it); a
cut path (an nftables rule dropping some source ports) raises ASSUMED_BAD events and its
repair GOOD ones; a probe gets an RTT on a live EV and a timeout on a dead one; the benchmark
sweeps and checks every size. Needs root; every namespace, rule and process goes at the end.
"""

from __future__ import annotations

import ipaddress
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.api import Controller, CtlEvState, EpRequest, Ev, ProbesTimedOut
from hostenv.netns import run
from tests.e2e.agent.agent_lab import AgentLab
from tests.e2e.agent.sniff import summarise
from tools.netns_processes import REPO, Background

PYTHON = sys.executable
EXAMPLES = REPO / "examples" / "api"
CUT_TABLE = "mrc_api_cut"


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, raw sockets): run with sudo"
    missing = [tool for tool in ("ip", "nft", "ethtool") if shutil.which(tool) is None]
    return f"missing tools: {', '.join(missing)}" if missing else None


pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or ""),
]


class ApiLab:
    """An ``AgentLab`` with an agent serving the host API on each side."""

    def __init__(self, tmp_path: Path) -> None:
        self.lab = AgentLab(tmp_path)
        self.sockets = {side: str(tmp_path / f"{side}.sock") for side in ("tx", "rx")}
        for side in ("tx", "rx"):
            self.lab.serve(side, "--socket", self.sockets[side])

    def example(
        self, side: str, name: str, *args: str, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run ``examples/api/NAME.py ARGS`` on ``side`` to completion."""
        command = [PYTHON, str(EXAMPLES / f"{name}.py"), *args, "--socket", self.sockets[side]]
        return self.lab.run(side, command, timeout=timeout)

    def start(self, side: str, name: str, *args: str) -> Background:
        """Start an example on ``side`` in the background (stopped by ``close``)."""
        command = [PYTHON, str(EXAMPLES / f"{name}.py"), *args, "--socket", self.sockets[side]]
        process = Background(self.lab.netns(side), command)
        self.lab.processes.append(process)
        return process

    def cut(self, side: str, ports: list[int]) -> None:
        """Drop every UDP packet ``side`` sends from these source ports (a dead path)."""
        ruleset = (
            f"table inet {CUT_TABLE} {{\n"
            "  chain out {\n"
            "    type filter hook output priority 0; policy accept;\n"
            f"    udp sport {{ {', '.join(map(str, ports))} }} counter drop\n"
            "  }\n"
            "}\n"
        )
        subprocess.run(
            ["ip", "netns", "exec", self.lab.netns(side), "nft", "-f", "-"],
            input=ruleset,
            text=True,
            check=True,
            timeout=10,
        )

    def restore(self, side: str) -> None:
        """Remove the cut."""
        run(["nft", "delete", "table", "inet", CUT_TABLE], check=False, netns=self.lab.netns(side))

    def close(self) -> None:
        self.lab.close()


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ApiLab]:
    lab = ApiLab(tmp_path)
    try:
        yield lab
    finally:
        started = list(lab.lab.processes)
        lab.close()
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert lab.lab.lab.prefix not in names, f"namespaces left behind: {names}"
        assert all(p.proc.poll() is not None for p in started), "a process outlived its test"


def _finish(process: Background, timeout: float = 120.0) -> tuple[int, str, str]:
    out, err = process.proc.communicate(timeout=timeout)
    return process.proc.returncode, out.decode(), err.decode()


def test_qp_management_writes_with_an_immediate(api):
    server = api.start("rx", "qp_management")
    client = api.example("tx", "qp_management", "--to", api.lab.addresses["rx"])
    assert client.returncode == 0, client.stderr
    code, out, err = _finish(server)
    assert code == 0, err
    result = json.loads(out)
    assert result["imm_data"] == 0x4D524321 and result["data_ok"] and result["byte_len"] == 4096
    assert result["qp"]["qp_state"] == "RTS"


def test_benchmark_sweeps_and_checks_every_size(api):
    server = api.start(
        "rx",
        "benchmark",
        "--min-size",
        "1024",
        "--size",
        "262144",
        "--step-factor",
        "16",
        "--iters",
        "200",
        "--json",
    )
    client = api.example(
        "tx",
        "benchmark",
        api.lab.addresses["rx"],
        "--min-size",
        "1024",
        "--size",
        "262144",
        "--step-factor",
        "16",
        "--iters",
        "200",
        "--json",
    )
    assert client.returncode == 0, client.stderr
    rows = [json.loads(line) for line in client.stdout.splitlines()]
    assert [row["size"] for row in rows] == [1024, 16384, 262144]
    assert all(row["goodput_bps"] > 0 for row in rows)
    code, out, err = _finish(server)
    assert code == 0, err
    assert all(entry["ok"] for entry in json.loads(out)["server"])


def test_explicit_evs_a_denied_ev_carries_no_packet_afterwards(api):
    made = api.example("tx", "explicit_evs", "--count", "16", "--deny", "3:3")
    assert made.returncode == 0, made.stderr
    profile = json.loads(made.stdout)
    denied = [e for e in profile["evs"] if e["state"] == "DENIED"]
    assert len(denied) == 1 and profile["denied"] == 1
    denied_port = int(denied[0]["val"][2:6], 16)  # the first 16 bits: the source port
    others = {int(e["val"][2:6], 16) for e in profile["evs"] if e["state"] == "GOOD"}
    sniffer = Background(
        api.lab.netns("tx"), [PYTHON, "-m", "tests.e2e.agent.sniff", api.lab.pair.tx_if, "60"]
    )
    api.lab.processes.append(sniffer)
    sniffer.wait_ready("sniffing")
    server = api.start(
        "rx", "benchmark", "--min-size", "65536", "--size", "65536", "--iters", "300", "--json"
    )
    client = api.example(
        "tx",
        "benchmark",
        api.lab.addresses["rx"],
        "--min-size",
        "65536",
        "--size",
        "65536",
        "--iters",
        "300",
        "--ev-profile",
        "1",
        "--json",
    )
    assert client.returncode == 0, client.stderr
    assert _finish(server)[0] == 0
    sniffer.proc.send_signal(15)
    captured = sniffer.proc.communicate(timeout=60)[0].decode().strip().splitlines()
    packets = json.loads(captured[-1])  # after "sniffing", which wait_ready may have read
    sent = [p for p in packets if p.get("outgoing") and p["opcode"] in range(0xC6, 0xCC)]
    assert sent, "data went out"
    ports = {p["sport"] for p in sent}
    assert denied_port not in ports, "the denied EV carried no data packet"
    assert ports <= others, "only the profile's EVs carried data"


def test_denying_a_live_ev_stops_its_use_within_an_rtt(api, tmp_path):
    """An EV carrying a QP's data is denied mid-transfer: no packet of the sender's leaves on
    it later than one RTT after the controller's call returned.

    The cut-off: ``returned`` is the wall clock just after ``set_ev_states`` answered (the
    agent denied the EV before it answered); one RTT later (the slowest of a few EV probes
    sent through the same loaded agents just before) anything the agent had already handed
    to the kernel has arrived. The capture's timestamps are taken as the veth hands each
    packet over, on the same clock."""
    made = api.example("tx", "explicit_evs", "--count", "16")
    assert made.returncode == 0, made.stderr
    evs = [Ev(bytes.fromhex(e["val"][2:]), e["port"]) for e in json.loads(made.stdout)["evs"]]
    victim, probed = evs[2], evs[8:12]
    victim_port = victim.as_int(16)  # the first 16 bits: the source port
    pcap = tmp_path / "deny.pcap"
    tcpdump = api.lab.capture(pcap, snaplen=HEADERS)
    try:
        frames = PcapFrames(pcap, api.lab.addresses["tx"])
        benchmark = ["--min-size", "65536", "--size", "65536", "--duration", "30", "--json"]
        api.start("rx", "benchmark", *benchmark)
        api.start("tx", "benchmark", api.lab.addresses["rx"], *benchmark, "--ev-profile", "1")
        live = frames.wait_for(lambda seen: any(p.sport == victim_port for p in seen))
        assert any(p.sport == victim_port for p in live), "the EV carried the QP's data"
        with Controller.open(api.sockets["tx"]) as ctl:
            requests = [EpRequest(i, api.lab.addresses["rx"], ev) for i, ev in enumerate(probed)]
            try:
                answers = ctl.ep_batch_send_wait(requests, rsp_timeout=2 * 10**9)
            except ProbesTimedOut as exc:  # one lost under the load: the others' RTTs serve
                answers = exc.responses
            assert answers, "the probes were answered"
            rtt = max(answer.rtt for answer in answers) / 1e9
            asked = time.time()
            ctl.set_ev_states(1, [(victim, CtlEvState.DENIED)])
            returned = time.time()
        cutoff = returned + rtt
        after = frames.wait_for(lambda seen: sum(p.time > cutoff for p in seen) >= AFTER_PACKETS)
    finally:
        tcpdump.terminate()
        tcpdump.wait(timeout=30)
    later = [p for p in after if p.time > cutoff]
    assert len(later) >= AFTER_PACKETS, "the QP kept sending after the deny"
    late = [p for p in later if p.sport == victim_port]
    assert not late, (
        f"{len(late)} packets on the denied EV after the cut-off "
        f"(first {late[0].time - returned:.6f} s after the call returned, RTT {rtt:.6f} s)"
    )
    before = [p for p in after if p.time <= asked]
    assert any(p.sport == victim_port for p in before)
    in_flight = [p for p in after if asked < p.time <= cutoff and p.sport == victim_port]
    print(
        f"deny: call {returned - asked:.6f} s, RTT {rtt:.6f} s, {len(in_flight)} packets on "
        f"the EV within the cut-off, {len(later)} after it on other EVs"
    )


def test_a_cut_path_raises_assumed_bad_events_and_its_repair_good_ones(api):
    made = api.example("tx", "explicit_evs", "--count", "8")
    assert made.returncode == 0, made.stderr
    evs = json.loads(made.stdout)["evs"]
    dead = {int(e["val"][2:6], 16) for e in evs[:2]}
    watcher = api.start("tx", "ev_events", "--profile", "1", "--timeout", "120")
    watcher.wait_ready("watching")
    events = EventLines(watcher)
    api.cut("tx", sorted(dead))
    # Long enough for the cut to be found and, once repaired, for probes to bring the EVs
    # back while the QP still lives; the test waits on the events, never on this clock.
    benchmark = ["--min-size", "65536", "--size", "65536", "--duration", "20", "--json"]
    server = api.start("rx", "benchmark", *benchmark)
    client = api.start("tx", "benchmark", api.lab.addresses["rx"], *benchmark, "--ev-profile", "1")
    bad = events.wait_for(lambda seen: dead <= _ports(seen, "ASSUMED_BAD"), DEADLINE_S)
    assert dead <= _ports(bad, "ASSUMED_BAD"), f"no ASSUMED_BAD for every cut EV: {bad}"
    api.restore("tx")
    # Every EV that was retired (a live one may be too: a late packet looks lost for a
    # moment) comes back GOOD once the path is repaired.
    final = events.wait_for(lambda seen: _all_back(seen), DEADLINE_S)
    assert _all_back(final), f"not every retired EV came back GOOD: {final}"
    assert _finish(client)[0] == 0
    assert _finish(server)[0] == 0


def test_a_probe_gets_an_rtt_on_a_live_ev_and_a_timeout_on_a_dead_one(api):
    api.cut("tx", [0xC0DE])
    probed = api.example(
        "tx",
        "ev_probes",
        "--to",
        api.lab.addresses["rx"],
        "0xc0010000",
        "0xc0de0000",
        "--timeout-ms",
        "200",
    )
    assert probed.returncode == 0, probed.stderr
    live, dead = json.loads(probed.stdout)
    assert live["rtt_ns"] > 0 and live["port"] == 1
    assert dead.get("timeout") is True


def test_generated_evs_deny_their_upper_t0_range(api):
    made = api.example("tx", "generated_evs", "--count", "128")
    assert made.returncode == 0, made.stderr
    result = json.loads(made.stdout)
    assert len(result["evs"]) == 128
    for ev in result["evs"]:
        assert (ev["state"] == "DENIED") == (ev["t0"] >= 180)


#: How long a test waits for something the agents do by themselves (bounds a wait, asserts
#: no speed).
DEADLINE_S = 60.0


class EventLines:
    """The JSON lines an ``ev_events`` example prints, read as they come."""

    def __init__(self, process: Background) -> None:
        assert process.proc.stdout is not None
        self.fd = process.proc.stdout.fileno()
        self.buffer = b""
        self.events: list[dict] = []

    def wait_for(self, done: Callable[[list[dict]], bool], timeout: float) -> list[dict]:
        """Read events until ``done(events)`` or ``timeout`` seconds pass; all seen so far."""
        deadline = time.monotonic() + timeout
        while not done(self.events):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                break
            chunk = os.read(self.fd, 65536)
            if not chunk:
                break
            self.buffer += chunk
            *lines, self.buffer = self.buffer.split(b"\n")
            self.events += [json.loads(line) for line in lines if b'"state"' in line]
        return self.events


#: Bytes of each frame the capture keeps: Ethernet, IPv4, UDP and BTH headers, and some.
HEADERS = 96
#: Packets on the other EVs after the cut-off that show the QP went on without the EV.
AFTER_PACKETS = 2000


@dataclass(frozen=True)
class Sent:
    """A packet the sender put on the veth: when, and the EV's source port."""

    time: float
    sport: int


class PcapFrames:
    """The packets from ``source`` in a pcap file tcpdump is still writing, read as they
    come (only whole records; a partly written one is read on the next call)."""

    def __init__(self, path: Path, source: str) -> None:
        self.path = path
        self.source = ipaddress.ip_address(source).packed
        self.offset = 0
        self.scale = 0.0
        self.packets: list[Sent] = []

    def read(self) -> list[Sent]:
        if not self.path.exists():
            return self.packets
        with self.path.open("rb") as file:
            file.seek(self.offset)
            data = file.read()
        at = 0
        if self.offset == 0:
            if len(data) < 24:
                return self.packets
            magic = struct.unpack_from("<I", data)[0]
            assert magic in (0xA1B2C3D4, 0xA1B23C4D), f"not a little-endian pcap: {magic:#x}"
            self.scale = 1e-6 if magic == 0xA1B2C3D4 else 1e-9
            at = 24
        while at + 16 <= len(data):
            seconds, fraction, captured, _length = struct.unpack_from("<IIII", data, at)
            if at + 16 + captured > len(data):
                break
            frame = data[at + 16 : at + 16 + captured]
            at += 16 + captured
            summary = summarise(frame)
            if summary is not None and frame[26:30] == self.source:
                sport = summary["sport"]
                assert isinstance(sport, int)
                self.packets.append(Sent(seconds + fraction * self.scale, sport))
        self.offset += at
        return self.packets

    def wait_for(self, done: Callable[[list[Sent]], bool]) -> list[Sent]:
        """Read until ``done(packets)`` or ``DEADLINE_S`` pass; every packet seen so far."""
        deadline = time.monotonic() + DEADLINE_S
        while not done(self.read()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.packets


def _ports(events: list[dict], state: str) -> set[int]:
    """The source ports (an EV's first 16 bits) of the events reporting ``state``."""
    return {int(e["ev"]["val"][2:6], 16) for e in events if e["state"] == state}


def _all_back(events: list[dict]) -> bool:
    """Every EV that went ASSUMED_BAD was last reported GOOD."""
    last: dict[int, str] = {}
    for event in events:
        last[int(event["ev"]["val"][2:6], 16)] = event["state"]
    return bool(last) and all(state == "GOOD" for state in last.values())
