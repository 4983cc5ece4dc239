"""Target selection: an unknown target or topology is a usage error; a target whose tools are
missing names each one and how to get it, before anything is created; ``auto`` takes bmv2
where its tools are present and linux otherwise, and says why; the linux target's differences
from BMv2 are listed, ECN according to the kernel's qdiscs; the controller is started for the
target it programs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.controller_run import controller_command
from testbed.targets import (
    TargetUnavailable,
    check_target,
    choose_target,
    default_target,
    differences,
)
from topologies import load_topology

REPO = Path(__file__).resolve().parents[3]
NO_QDISC = {"pfifo": True, "tbf": True, "htb": True, "red": False, "codel": False}
#: The compiled program the bmv2 target loads.
P4_ARTIFACTS = ("mrc.json", "mrc.p4info.txtpb")


def _problems_of(name: str) -> list[str]:
    """What target ``name`` lacks here to run leaf-spine (empty: it can run)."""
    try:
        check_target(name, load_topology("leaf-spine"))
    except TargetUnavailable as unavailable:
        return unavailable.problems
    return []


def _without_bmv2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMPLE_SWITCH_GRPC", "/nonexistent/simple_switch_grpc")
    monkeypatch.setenv("SIMPLE_SWITCH_CLI", "/nonexistent/simple_switch_CLI")


def test_an_unknown_target_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown target 'netfpga'; targets: bmv2, linux, auto"):
        check_target("netfpga", load_topology("leaf-spine"))


def test_tofino_is_refused_because_there_is_no_tofino_switch_to_start_here() -> None:
    with pytest.raises(ValueError, match=r"'tofino': there is no Tofino switch to start here"):
        check_target("tofino", load_topology("leaf-spine"))


def test_missing_bmv2_is_named_with_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mininet.net", reason="Mininet is not installed")
    _without_bmv2(monkeypatch)
    with pytest.raises(TargetUnavailable) as raised:
        check_target("bmv2", load_topology("leaf-spine"))
    problems = "\n".join(raised.value.problems)
    assert "simple_switch_grpc not found: make toolchain (builds PI, behavioral-model" in problems
    assert "simple_switch_CLI not found: make toolchain (installed with behavioral" in problems
    assert problems.count("simple_switch_grpc not found") == 1


def test_linux_needs_tc_and_says_where_it_comes_from(monkeypatch: pytest.MonkeyPatch) -> None:
    from testbed.mininet import preflight

    real_which = preflight.shutil.which
    monkeypatch.setattr(
        preflight.shutil, "which", lambda name: None if name == "tc" else real_which(name)
    )
    with pytest.raises(TargetUnavailable) as raised:
        check_target("linux", load_topology("leaf-spine"))
    assert "command 'tc' not found (`make setup` installs it)" in raised.value.problems


def test_linux_does_not_need_bmv2(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_bmv2(monkeypatch)
    problems = _problems_of("linux")
    assert not [problem for problem in problems if "simple_switch" in problem], problems


def test_auto_takes_linux_where_bmv2_is_missing_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _without_bmv2(monkeypatch)
    choice = default_target()
    assert choice.target.name == "linux"
    assert choice.announcement.startswith("target linux: kernel switches, because BMv2 ")
    assert "simple_switch_grpc not found and 1 more" in choice.announcement
    assert "\n" not in choice.announcement


def test_auto_takes_bmv2_where_its_tools_are_present() -> None:
    choice = default_target({"bmv2": []})
    assert choice.target.name == "bmv2"
    assert choice.announcement == (
        "target bmv2: BMv2's tools are present (TARGET=linux for kernel switches)"
    )


def _bmv2_usable_here() -> bool:
    """BMv2's toolchain looked up directly, not through ``testbed.targets``: the switch (where
    ``SIMPLE_SWITCH_GRPC`` says, else on PATH) built with Thrift, its CLI, the compiled
    program."""
    switch = shutil.which(os.environ.get("SIMPLE_SWITCH_GRPC") or "simple_switch_grpc")
    cli = shutil.which(os.environ.get("SIMPLE_SWITCH_CLI") or "simple_switch_CLI")
    if switch is None or cli is None:
        return False
    usage = subprocess.run([switch, "--help"], capture_output=True, text=True, timeout=10)
    built = all((REPO / "p4src" / "build" / name).is_file() for name in P4_ARTIFACTS)
    return "--thrift-port" in usage.stdout + usage.stderr and built


def test_auto_follows_this_machine() -> None:
    expected = "bmv2" if _bmv2_usable_here() else "linux"
    assert default_target().target.name == expected


def test_a_named_target_is_announced_as_asked() -> None:
    if _problems_of("linux"):
        pytest.skip(f"linux cannot run here: {_problems_of('linux')[0]}")
    choice = choose_target("linux", load_topology("leaf-spine"))
    assert choice.announcement == "target linux: as asked"


def test_bmv2_has_no_differences_and_linux_lists_what_it_does_not_do() -> None:
    assert differences("bmv2", NO_QDISC) == []
    listed = "\n".join(differences("linux", NO_QDISC))
    assert "no packet trimming" in listed
    assert "no per-member counters: per-interface" in listed
    assert "no ECN marking: this kernel offers neither RED nor codel" in listed
    assert "no switch restart" in listed


def test_ecn_is_said_to_be_marked_only_where_the_kernel_has_red_or_codel() -> None:
    with_red = "\n".join(differences("linux", {**NO_QDISC, "red": True}))
    assert "ECN marking by the kernel's red" in with_red
    assert "no ECN marking" not in with_red
    assert "rate-limited fabric ports only" in with_red
    codel_only = "\n".join(differences("linux", {**NO_QDISC, "codel": True}))
    assert "ECN marking by the kernel's codel" in codel_only
    unprobed = "\n".join(differences("linux", None))
    assert "ECN marking unknown" in unprobed


def test_the_controller_is_started_for_the_target_it_programs(tmp_path: Path) -> None:
    socket, log = tmp_path / "mn0a1b-controller.sock", tmp_path / "mn0a1b-controller.jsonl"
    bmv2 = controller_command("leaf-spine", socket, log, "mn0a1b")
    assert "--target" not in bmv2 and "--netns-prefix" not in bmv2  # as it always was
    linux = controller_command("leaf-spine", socket, log, "mn0a1b", target="linux")
    assert linux[linux.index("--target") + 1] == "linux"
    assert linux[linux.index("--netns-prefix") + 1] == "mn0a1b"
    assert "--no-discovery" not in linux
    quiet = controller_command("leaf-spine", socket, log, "mn0a1b", False, "linux")
    assert quiet[-1] == "--no-discovery"


def test_the_runner_exits_2_for_an_unknown_target_or_topology() -> None:
    pytest.importorskip("mininet.net", reason="Mininet is not installed")
    for args in (["leaf-spine", "--target", "netfpga"], ["no-such-topology"]):
        proc = subprocess.run(
            [sys.executable, "-m", "testbed", "run", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 2, proc.stderr
        assert any(line.startswith("testbed: ") for line in proc.stderr.splitlines()), proc.stderr


def test_the_runner_refuses_tofino_saying_there_is_no_tofino_switch_here() -> None:
    pytest.importorskip("mininet.net", reason="Mininet is not installed")
    proc = subprocess.run(
        [sys.executable, "-m", "testbed", "run", "leaf-spine", "--target", "tofino"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2, proc.stderr
    assert "testbed: target 'tofino': there is no Tofino switch to start here" in proc.stderr
