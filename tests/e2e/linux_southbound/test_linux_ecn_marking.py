"""ECN markers on real namespaces: the kernel takes each of the southbound's marker command
lines under a port's tbf and shows the marker back (a marker whose qdisc this kernel lacks, as
``hostenv/qdiscs.py`` probes it, is skipped with a line saying so), and where the kernel offers
``red`` a shaped fabric port gets a RED child with ``ecn`` under its tbf, which a second
program() reads back and leaves alone.

Root only (skips otherwise); run under the shared lock:
``flock /tmp/mrc-heavy.lock .venv/bin/pytest tests/e2e/linux_southbound/test_linux_ecn_marking.py``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from controller.intent import compute_intent
from controller.intent.model import PortIntent
from controller.southbound.linux.ecn import (
    MARKER_PARENT,
    SHAPER_HANDLE,
    EcnMarker,
    ce_threshold_marker,
    plain_fifo,
    red_marker,
)
from hostenv.netns import terminate_on_signals
from hostenv.qdiscs import QDISC_PROBES, probe_qdiscs
from hostenv.tbf import FRAME_BYTES, tbf_parameters
from tests.e2e.linux_southbound.conftest import skip_reason
from tests.e2e.linux_southbound.kernel_lab import KernelFabricLab
from tests.e2e.linux_southbound.southbound_driver import running_southbound
from tests.e2e.linux_southbound.test_linux_southbound import SWITCHES, program_all
from topologies.model import Topology

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]

#: A shaped fabric port as the intent gives one (its ECN thresholds from the defaults' range).
PORT = PortIntent(
    port=1,
    host_facing=False,
    ecn_enabled=True,
    ecn_min_threshold=10,
    ecn_max_threshold=40,
    trim_threshold=60,
    queue_depth=64,
    queue_rate_pps=2000,
    high_priority_queue_depth=0,
    high_priority_queue_rate_pps=0,
    lossless_queue_depth=0,
)
SHAPER = tbf_parameters(PORT.queue_rate_pps, PORT.queue_depth)

VETH_PEER = ("type", "veth", "peer", "name", "ecnchk1")


@pytest.fixture
def scratch_netns() -> Iterator[str]:
    """A throw-away namespace with one veth pair, ``ecnchk0`` - ``ecnchk1``; deleted on any
    exit (SIGTERM included)."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    name = f"ecnchk-{uuid.uuid4().hex[:8]}"
    with terminate_on_signals():
        subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
        try:
            subprocess.run(
                ["ip", "-n", name, "link", "add", "ecnchk0", *VETH_PEER],
                check=True,
                capture_output=True,
            )
            yield name
        finally:
            subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


@pytest.fixture(scope="module")
def offered_qdiscs() -> dict[str, bool]:
    """Which of the probed qdiscs this kernel offers (``hostenv/qdiscs.py``)."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    return probe_qdiscs()


def _tc(netns: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["tc", "-n", netns, *arguments], capture_output=True, text=True, timeout=10, check=False
    )


@pytest.mark.parametrize(
    "marker",
    [
        red_marker(PORT),
        ce_threshold_marker("codel", PORT),
        ce_threshold_marker("fq_codel", PORT),
        plain_fifo(SHAPER),
    ],
    ids=lambda marker: marker.kind,
)
def test_the_kernel_takes_the_marker_under_the_shaper_and_shows_it_back(
    offered_qdiscs: dict[str, bool], scratch_netns: str, marker: EcnMarker
) -> None:
    # The fifo kinds (the unmarked fallback) are part of every kernel's sch_fifo; the others
    # are modules a kernel may lack.
    if marker.kind in QDISC_PROBES and not offered_qdiscs[marker.kind]:
        pytest.skip(f"this kernel has no {marker.kind} qdisc (hostenv/qdiscs.py)")
    shaper = _tc(
        scratch_netns, "qdisc", "replace", "dev", "ecnchk0", "root", "handle", SHAPER_HANDLE,
        *SHAPER.tc_arguments(),
    )  # fmt: skip
    assert shaper.returncode == 0, shaper.stderr
    child = _tc(
        scratch_netns, "qdisc", "replace", "dev", "ecnchk0", "parent", MARKER_PARENT,
        *marker.tc_arguments(),
    )  # fmt: skip
    assert child.returncode == 0, child.stderr
    (shown,) = [
        qdisc
        for qdisc in json.loads(_tc(scratch_netns, "-j", "qdisc", "show", "dev", "ecnchk0").stdout)
        if qdisc.get("parent") == MARKER_PARENT
    ]
    assert shown["kind"] == marker.kind


@pytest.fixture(scope="module")
def red_kernel(offered_qdiscs: dict[str, bool]) -> None:
    """Skips unless this kernel offers ``red`` (probed in a throw-away namespace)."""
    if not offered_qdiscs["red"]:
        pytest.skip("this kernel has no red qdisc (hostenv/qdiscs.py)")


def test_a_shaped_fabric_port_gets_a_red_marker_that_reads_back(
    red_kernel: None, fabric_lab: KernelFabricLab, small_topology: Topology
) -> None:
    async def scenario() -> tuple[bool, tuple[int, int, int]]:
        async with running_southbound(SWITCHES, fabric_lab.prefix) as (southbound, _):
            first = await program_all(southbound, small_topology)
            again = await program_all(southbound, small_topology, read_back=True)
            ok = all(result.ok for result in first.values())
            return ok, (again["l1"].writes, again["l1"].queue_commands, again["l1"].requests)

    ok, second = asyncio.run(scenario())
    assert ok
    assert second == (0, 0, 0)
    qdiscs = json.loads(fabric_lab.run_in("l1", ["tc", "-j", "qdisc", "show", "dev", "swp3"]))
    (root,) = [qdisc for qdisc in qdiscs if qdisc.get("root")]
    (child,) = [qdisc for qdisc in qdiscs if qdisc.get("parent") == MARKER_PARENT]
    assert (root["kind"], root["handle"]) == ("tbf", SHAPER_HANDLE)
    assert child["kind"] == "red"
    port3 = next(
        port for port in compute_intent(small_topology).switch("l1").ports if port.port == 3
    )
    assert child["options"]["min"] == port3.ecn_min_threshold * FRAME_BYTES
    assert child["options"]["ecn"] is True  # tc -j prints each RED flag as a boolean
    # Toward the host (port 1) and on the unshaped port 2: no marker.
    for interface in ("swp1", "swp2"):
        shown = json.loads(fabric_lab.run_in("l1", ["tc", "-j", "qdisc", "show", "dev", interface]))
        assert all(qdisc["kind"] != "red" for qdisc in shown)
