"""Target selection: an unknown target or topology is a usage error; a target whose tools are
missing names each one and how to get it, before anything is created."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testbed.targets import TargetUnavailable, check_target
from topologies import load_topology

REPO = Path(__file__).resolve().parents[3]


def test_an_unknown_target_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown target 'tofino'; targets: bmv2"):
        check_target("tofino", load_topology("leaf-spine"))


def test_missing_bmv2_is_named_with_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mininet.net", reason="Mininet is not installed")
    monkeypatch.setenv("SIMPLE_SWITCH_GRPC", "/nonexistent/simple_switch_grpc")
    monkeypatch.setenv("SIMPLE_SWITCH_CLI", "/nonexistent/simple_switch_CLI")
    with pytest.raises(TargetUnavailable) as raised:
        check_target("bmv2", load_topology("leaf-spine"))
    problems = "\n".join(raised.value.problems)
    assert "simple_switch_grpc not found: build PI and behavioral-model" in problems
    assert "simple_switch_CLI not found: installed with behavioral-model" in problems


def test_the_runner_exits_2_for_an_unknown_target_or_topology() -> None:
    pytest.importorskip("mininet.net", reason="Mininet is not installed")
    for args in (["leaf-spine", "--target", "tofino"], ["no-such-topology"]):
        proc = subprocess.run(
            [sys.executable, "-m", "testbed", "run", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("testbed: ")
