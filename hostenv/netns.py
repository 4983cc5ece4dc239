"""Throw-away network namespaces and veth pairs for tests and benchmarks.

Everything made here is registered in a `NetnsLab` and removed by `close()`, which the context
manager calls on any exit (a failed test, Ctrl-C, SIGTERM): no namespace or veth outlives a run.
Offloads (checksum, segmentation, receive coalescing) are turned off on both ends of every veth:
with them on, the kernel hands over packets with unfinished checksums or merged segments, which a
software switch then forwards or drops unpredictably.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import FrameType

OFFLOAD_FEATURES = ("rx", "tx", "sg", "tso", "gso", "gro", "lro", "rxvlan", "txvlan")


def run(args: Sequence[str], *, check: bool = True, netns: str | None = None) -> str:
    """Run a command (inside `netns` if given); raise with its stderr when it fails."""
    full = ["ip", "netns", "exec", netns, *args] if netns else list(args)
    proc = subprocess.run(full, capture_output=True, text=True, timeout=30, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"command failed ({proc.returncode}): {' '.join(full)}: {proc.stderr.strip()}"
        )
    return proc.stdout


def disable_offloads(ifname: str, netns: str | None = None) -> None:
    """Turn off every offload ethtool knows on this interface (unknown features are ignored)."""
    for feature in OFFLOAD_FEATURES:
        run(["ethtool", "-K", ifname, feature, "off"], check=False, netns=netns)


@dataclass
class NetnsLab:
    """A set of namespaces and veths made for one run, removed together.

    `prefix` makes names unique per run so two runs never collide.
    """

    prefix: str = field(default_factory=lambda: f"mrc{uuid.uuid4().hex[:5]}")
    namespaces: list[str] = field(default_factory=list)
    root_links: list[str] = field(default_factory=list)
    _closed: bool = False

    def add_netns(self, name: str) -> str:
        full = f"{self.prefix}-{name}"
        run(["ip", "netns", "add", full])
        self.namespaces.append(full)
        run(["ip", "link", "set", "lo", "up"], netns=full)
        return full

    def add_veth(
        self,
        a: str,
        b: str,
        *,
        netns_a: str | None = None,
        netns_b: str | None = None,
        mtu: int = 1500,
    ) -> None:
        """Create veth a<->b, move each end to its namespace, offloads off, no IPv6 chatter, up."""
        run(["ip", "link", "add", a, "type", "veth", "peer", "name", b])
        if netns_a is None or netns_b is None:
            self.root_links.append(a if netns_a is None else b)
        for ifname, ns in ((a, netns_a), (b, netns_b)):
            if ns is not None:
                run(["ip", "link", "set", ifname, "netns", ns])
            run(["sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1"], check=False, netns=ns)
            run(["ip", "link", "set", ifname, "mtu", str(mtu)], netns=ns)
            disable_offloads(ifname, ns)
            run(["ip", "link", "set", ifname, "up"], netns=ns)

    def close(self) -> None:
        """Remove every namespace (and so its veths) and any veth left in the root namespace."""
        if self._closed:
            return
        self._closed = True
        for link in self.root_links:
            run(["ip", "link", "del", link], check=False)
        for ns in reversed(self.namespaces):
            for pid in run(["ip", "netns", "pids", ns], check=False).split():
                run(["kill", "-9", pid], check=False)
            run(["ip", "netns", "del", ns], check=False)

    def __enter__(self) -> NetnsLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def terminate_on_signals() -> Iterator[None]:
    """Turn SIGINT/SIGTERM/SIGHUP into KeyboardInterrupt, so `with` blocks unwind and clean up.

    SIGINT is set too because a process started from a script's background job inherits it
    ignored, and Python then never raises KeyboardInterrupt: Ctrl-C would leave a run up."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
