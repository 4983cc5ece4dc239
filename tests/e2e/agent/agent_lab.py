"""Two network namespaces joined by a veth, and agent processes in them, for the e2e tests.

Built on ``hostenv.netns.NetnsLab`` and the benchmark's ``VethPair``: every namespace, veth,
nftables rule and process made here is removed by ``close()``, which the fixture calls on any
exit, a failed assertion included.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

from hostenv.netns import NetnsLab, run
from tools.netns_processes import REPO, Background
from tools.veth_lab import VethPair, make_veth_pair
from wire.constants import ROCEV2_UDP_PORT

AGENT = [sys.executable, "-m", "agent.cli.agent_main"]
PERF = [sys.executable, "-m", "agent.cli.perf_main"]


class AgentLab:
    """Namespaces ``tx`` and ``rx``, one veth, and the processes started in them."""

    def __init__(self, tmp_path: Path, ipv6: bool = False, second_plane: bool = False) -> None:
        self.tmp_path = tmp_path
        self.lab = NetnsLab()
        self.processes: list[Background] = []
        try:
            self.pair: VethPair = make_veth_pair(self.lab)
            self.addresses = {"tx": self.pair.tx_ip, "rx": self.pair.rx_ip}
            #: Plane 1's addresses and interfaces, when there is a second plane.
            self.plane1: dict[str, str] = {}
            if ipv6:
                self._add_ipv6()
            if second_plane:
                self._add_second_plane()
        except BaseException:
            self.lab.close()
            raise

    def _add_second_plane(self) -> None:
        pair = self.pair
        tx_if, rx_if = f"{self.lab.prefix}u", f"{self.lab.prefix}s"
        self.lab.add_veth(tx_if, rx_if, netns_a=pair.tx_ns, netns_b=pair.rx_ns)
        run(["ip", "addr", "add", "10.252.0.1/24", "dev", tx_if], netns=pair.tx_ns)
        run(["ip", "addr", "add", "10.252.0.2/24", "dev", rx_if], netns=pair.rx_ns)
        self.plane1 = {"tx": "10.252.0.1", "rx": "10.252.0.2", "tx_if": tx_if, "rx_if": rx_if}

    def rx_packets(self, side: str, ifname: str) -> int:
        """Packets ``ifname`` in ``side``'s namespace has received."""
        text = run(
            ["cat", f"/sys/class/net/{ifname}/statistics/rx_packets"], netns=self.netns(side)
        )
        return int(text)

    def _add_ipv6(self) -> None:
        pair = self.pair
        for ns, ifname, address in (
            (pair.tx_ns, pair.tx_if, "fd00:251::1"),
            (pair.rx_ns, pair.rx_if, "fd00:251::2"),
        ):
            run(["sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=0"], netns=ns)
            run(["ip", "-6", "addr", "add", f"{address}/64", "dev", ifname, "nodad"], netns=ns)
        self.addresses = {"tx": "fd00:251::1", "rx": "fd00:251::2"}

    def netns(self, side: str) -> str:
        """The namespace of ``side`` ("tx" or "rx")."""
        return self.pair.tx_ns if side == "tx" else self.pair.rx_ns

    def start(self, side: str, command: list[str], ready: str) -> Background:
        """Start a server in ``side`` and wait for its ``ready`` line."""
        process = Background(self.netns(side), command)
        self.processes.append(process)
        process.wait_ready(ready)
        return process

    def serve(self, side: str, *extra: str) -> Background:
        """``mrc-agent serve`` on ``side``'s address, with ``extra`` options."""
        command = [*AGENT, "serve", "--plane", self.addresses[side], *extra]
        return self.start(side, command, "ready")

    def run(
        self, side: str, command: list[str], timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Run a command in ``side`` to completion (no check: tests look at the code)."""
        return subprocess.run(
            ["ip", "netns", "exec", self.netns(side), *command],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
            check=False,
        )

    def capture(self, pcap: Path, snaplen: int = 0) -> subprocess.Popen[bytes]:
        """tcpdump on the receiver's veth, UDP 4791 only, full frames (or their first
        ``snaplen`` bytes: headers only, for long captures), each written as it arrives;
        returns once tcpdump is listening. Stop it with SIGTERM."""
        proc = subprocess.Popen(
            # --immediate-mode: otherwise libpcap hands packets over in blocks after a 1 s
            # timeout, and a transfer that ends sooner leaves an empty capture.
            ["ip", "netns", "exec", self.netns("rx"), "tcpdump", "-i", self.pair.rx_if,
             "-s", str(snaplen), "-U", "--immediate-mode", "-w", str(pcap),
             "udp", "port", str(ROCEV2_UDP_PORT)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        # tcpdump says "listening on" once its capture socket is attached; the file header
        # alone comes earlier, and a fast transfer on a loaded machine could finish in between.
        assert proc.stderr is not None
        fd = proc.stderr.fileno()
        seen, deadline = b"", time.monotonic() + 10
        while b"listening on" not in seen:
            left = deadline - time.monotonic()
            assert left > 0 and proc.poll() is None, f"tcpdump did not start: {seen.decode()}"
            ready, _, _ = select.select([fd], [], [], min(left, 0.2))
            if ready:
                seen += os.read(fd, 4096)
        return proc

    def close(self) -> None:
        """Stop every process, then remove namespaces and veths."""
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        self.lab.close()
