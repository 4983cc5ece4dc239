"""Fixtures for the linux southbound's end-to-end tests: a small fabric as bare namespaces.

The tests need root (network namespaces), ``ip``, ``tc``, ``ethtool`` and ``sysctl``; they skip
with one line saying what is missing. The fabric is built once per module and removed at the
end whatever happens; tests that cut a link put it back.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from hostenv.netns import terminate_on_signals
from tests.e2e.linux_southbound.kernel_lab import KernelFabricLab, kernel_fabric
from topologies import Topology, load_topology_text

#: Two leaves, two spines, one host per leaf: two paths between the hosts. The l1-s2 link is
#: shaped (a tbf on l1 port 3 and s2 port 1).
SMALL_FABRIC = """
name: kernel-small
planes:
- {id: 0}
switches:
- {name: l1, role: leaf, device_id: 1}
- {name: l2, role: leaf, device_id: 2}
- {name: s1, role: spine, device_id: 3}
- {name: s2, role: spine, device_id: 4}
hosts:
- name: h1
  nics:
  - {name: eth0, switch: l1, port: 1}
- name: h2
  nics:
  - {name: eth0, switch: l2, port: 1}
links:
- {a: 'l1:2', b: 's1:1'}
- {a: 'l1:3', b: 's2:1', queue_rate_pps: 2000}
- {a: 'l2:2', b: 's1:2'}
- {a: 'l2:3', b: 's2:2'}
"""

TOOLS = ("ip", "tc", "ethtool", "sysctl", "python3")


def skip_reason() -> str | None:
    """Why these tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces): run with sudo"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"needs {', '.join(missing)}"
    return None


@pytest.fixture(scope="module")
def small_topology() -> Topology:
    """The two-path fabric above."""
    return load_topology_text(SMALL_FABRIC, source="kernel-small")


@pytest.fixture(scope="module")
def fabric_lab(small_topology: Topology) -> Iterator[KernelFabricLab]:
    """The small fabric as namespaces (switches unprogrammed until a test programs them)."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with terminate_on_signals(), kernel_fabric(small_topology) as lab:
        yield lab
