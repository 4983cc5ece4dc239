"""A short ``make fuzz``: hostile peers and local clients against a running agent while real
transfers run (``tools.fuzz.soak``). ``make fuzz FUZZ_S=600`` is the long form.

Needs root (namespaces); skips without it.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tools.fuzz.soak import soak

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces): run with sudo"),
    pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2's ip"),
]


def _namespaces() -> set[str]:
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in listing.splitlines() if line.strip()}


def test_the_agent_outlives_a_short_soak_with_bounded_memory_and_intact_files():
    before = _namespaces()
    result = soak(duration_s=12.0, seed=7)
    assert _namespaces() <= before, "the soak left namespaces behind"
    assert result.failures == []
    assert result.agent_alive and result.agent_exit_code == 0
    assert 0 < result.rss_peak <= result.rss_limit
    assert result.honest_transfers >= 1
    attacks = result.attacks
    # Every attack ran, and the hostile ones got the answers the protocol gives them.
    assert attacks.get("deep_line:closed", 0) >= 1
    assert attacks.get("forty_1g_hellos:error:over_limit", 0) >= 1
    assert not any(key.startswith("forty_1g_hellos:welcome") for key in attacks)
    assert attacks.get("lying_commit:error:transfer_failed", 0) >= 1
    assert result.core_drops >= attacks["udp_garbage:datagrams"] // 2
    assert result.control.get("status:ok", 0) >= 1
    assert "status:failed" not in result.control
    limits = result.side_channel["limits"]
    assert limits["memory_held"] == 0 and limits["setups_in_progress"] == 0
    assert (
        limits["refused"].get("max_receive_memory", 0) + limits["refused"].get("max_peer_memory", 0)
        >= 1
    )
