"""The targets a run can bring up: each a software controller target with its switch kind,
looked up by name; a hardware or unknown name is refused saying why; what a target lacks here
is its kind's needs, then its own, then its tools and the controller side's, each once."""

from __future__ import annotations

import pytest

from testbed.mininet import switch_target as module
from testbed.mininet.switch_kind import SwitchKind
from testbed.mininet.switch_target import (
    BMV2,
    LINUX,
    find_switch_target,
    hardware_reason,
    switch_target,
    switch_target_names,
)


def test_bmv2_and_linux_run_as_a_bmv2_process_and_a_kernel_namespace() -> None:
    assert switch_target_names()[:2] == ("bmv2", "linux")
    assert switch_target("bmv2").kind is SwitchKind.BMV2 and not SwitchKind.BMV2.in_own_namespace
    assert switch_target("linux").kind is SwitchKind.KERNEL and SwitchKind.KERNEL.in_own_namespace
    assert switch_target("linux").capabilities.restart is False


def test_a_hardware_target_is_refused_with_its_declared_reason() -> None:
    assert find_switch_target("tofino") is None
    assert "no Tofino switch to start here" in (hardware_reason("tofino") or "")
    assert hardware_reason("bmv2") is None and hardware_reason("netfpga") is None


def test_machine_problems_are_the_kinds_then_its_own_then_the_tools_each_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(module, "machine_problems", lambda kind: [f"{kind}: root", "no switch"])
    monkeypatch.setattr(module, "bmv2_binary_problems", lambda: ["no switch"])
    monkeypatch.setattr(module, "find_tool", lambda spec: None)
    problems = BMV2.machine_problems()
    assert problems[:3] == [
        "bmv2: root",
        "no switch",
        f"Mininet (mn) not found: {module.MININET.how_to_get}",
    ]
    assert problems.count("no switch") == 1
    assert any(line.startswith("simple_switch_CLI not found") for line in problems)
    assert LINUX.machine_problems()[:2] == ["kernel: root", "no switch"]
