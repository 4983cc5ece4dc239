"""The run's controller command line carries the routing policy asked for, normalised, and
refuses a bad one before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.controller_run import controller_command


def test_a_routing_policy_is_passed_on_normalised(tmp_path: Path) -> None:
    socket, log = tmp_path / "c.sock", tmp_path / "c.jsonl"
    command = controller_command("leaf-spine", socket, log, "mn0a1b", routing="converge")
    assert command[command.index("--routing") + 1] == "converge:3"
    assert "--routing" not in controller_command("leaf-spine", socket, log, "mn0a1b")


def test_a_path_mode_is_passed_on_and_a_bad_one_refused(tmp_path: Path) -> None:
    socket, log = tmp_path / "c.sock", tmp_path / "c.jsonl"
    command = controller_command("leaf-spine", socket, log, "mn0a1b", path_mode="structured")
    assert command[command.index("--path-mode") + 1] == "structured"
    assert "--path-mode" not in controller_command("leaf-spine", socket, log, "mn0a1b")
    with pytest.raises(ValueError, match="'usid' is not a valid PathMode"):
        controller_command("leaf-spine", socket, log, "mn0a1b", path_mode="usid")


def test_a_bad_routing_policy_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="routing must be"):
        controller_command("leaf-spine", tmp_path / "s", tmp_path / "l", "mn0a1b", routing="rip")
