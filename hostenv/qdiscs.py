"""Probe which queueing disciplines the running kernel offers.

Kernels differ: some machines have only pfifo, tbf and htb (no netem, RED or codel). Features that
need a missing qdisc are skipped and reported, never failed. The probe adds each qdisc to a dummy
veth in a throw-away network namespace (veth rather than dummy: some kernels lack the dummy
driver, so it changes nothing on the host; it needs root.
"""

from __future__ import annotations

import subprocess
import uuid

QDISC_PROBES: dict[str, tuple[str, ...]] = {
    "pfifo": ("pfifo", "limit", "100"),
    "tbf": ("tbf", "rate", "1mbit", "burst", "32kbit", "latency", "10ms"),
    "htb": ("htb",),
    "netem": ("netem", "delay", "1ms"),
    "red": (
        "red",
        "limit",
        "400000",
        "min",
        "30000",
        "max",
        "90000",
        "avpkt",
        "1000",
        "burst",
        "55",
        "probability",
        "0.1",
        "ecn",
    ),
    "codel": ("codel", "ce_threshold", "1ms"),
    "fq_codel": ("fq_codel", "ce_threshold", "1ms"),
}


def _run(*args: str) -> bool:
    return subprocess.run(args, capture_output=True, timeout=10, check=False).returncode == 0


def probe_qdiscs() -> dict[str, bool]:
    """Map of qdisc name to whether the kernel accepted it. Raises PermissionError without root."""
    netns = f"mrcq-{uuid.uuid4().hex[:8]}"
    if not _run("ip", "netns", "add", netns):
        raise PermissionError("cannot create a network namespace (are you root?)")
    try:
        if not _run(
            "ip", "-n", netns, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1"
        ):
            raise OSError("cannot create a veth pair in the probe namespace")
        result = {}
        for name, args in QDISC_PROBES.items():
            ok = _run(
                "ip",
                "netns",
                "exec",
                netns,
                "tc",
                "qdisc",
                "replace",
                "dev",
                "probe0",
                "root",
                *args,
            )
            result[name] = ok
        return result
    finally:
        _run("ip", "netns", "del", netns)
