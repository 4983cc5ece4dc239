"""The path mode in the controller: ``path_mode:`` in the file, ``--path-mode`` on the command
line (which wins), ECMP when neither says; the running controller programs the mode's static
tables and keeps them through link changes; the linux target refuses structured EV, and takes
SRv6 only where the kernel routes uSID carriers itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.app.config import ConfigError, ControllerConfig, load_config
from controller.app.runtime import check_compatible
from controller.app.status import collect_status, format_status
from controller.cli import main
from controller.southbound.linux import path_modes
from tests.unit.controller.app.test_fabric_routing import H3, RoutingScenario, settle
from topologies import Topology
from topologies.paths import PathMode


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "controller.yaml"
    path.write_text(text)
    return path


def test_the_default_is_ecmp():
    assert load_config(None).path_mode is PathMode.ECMP


@pytest.mark.parametrize("mode", ["ecmp", "structured", "srv6"])
def test_the_file_sets_the_mode(tmp_path, mode):
    assert load_config(_write(tmp_path, f"path_mode: {mode}\n")).path_mode is PathMode(mode)


@pytest.mark.parametrize("text", ["hashed", "1", "[srv6]", "STRUCTURED"])
def test_a_bad_mode_in_the_file_names_the_file_and_the_choices(tmp_path, text):
    path = _write(tmp_path, f"path_mode: {text}\n")
    with pytest.raises(ConfigError, match=f"{path}: path_mode must be one of ecmp, structured, "):
        load_config(path)


def test_the_command_line_wins_over_the_file(tmp_path):
    config = load_config(_write(tmp_path, "path_mode: srv6\n"))
    assert config.with_overrides(path_mode=None).path_mode is PathMode.SRV6
    assert config.with_overrides(path_mode="structured").path_mode is PathMode.STRUCTURED
    with pytest.raises(ConfigError, match="command line: path_mode must be"):
        ControllerConfig().with_overrides(path_mode="usid")


def test_the_linux_target_refuses_structured_ev_saying_why(leaf_spine):
    config = ControllerConfig(target="linux", path_mode=PathMode.STRUCTURED)
    with pytest.raises(ConfigError, match="structured needs a P4 target: kernel switches hash"):
        check_compatible(leaf_spine, config)
    check_compatible(leaf_spine, ControllerConfig(target="linux"))


def test_the_linux_target_takes_srv6_only_where_the_kernel_takes_seg6local_routes(
    leaf_spine, monkeypatch
):
    config = ControllerConfig(target="linux", path_mode=PathMode.SRV6)
    refused = (
        "this kernel takes no seg6local NEXT-C-SID route (lwt encapsulation type not supported)"
    )
    monkeypatch.setattr(path_modes, "seg6local_missing", lambda: refused)
    with pytest.raises(ConfigError, match=r"path mode srv6 .* seg6local routes, and this kernel"):
        check_compatible(leaf_spine, config)
    monkeypatch.setattr(path_modes, "seg6local_missing", lambda: None)
    check_compatible(leaf_spine, config)


def test_the_linux_target_refuses_srv6_when_the_kernel_cannot_be_probed(leaf_spine, monkeypatch):
    def no_root() -> str | None:
        raise PermissionError("cannot create a network namespace (are you root?)")

    monkeypatch.setattr(path_modes, "seg6local_missing", no_root)
    config = ControllerConfig(target="linux", path_mode=PathMode.SRV6)
    with pytest.raises(ConfigError, match="cannot tell whether this kernel routes uSID carriers"):
        check_compatible(leaf_spine, config)


def test_the_cli_refuses_linux_with_structured_ev_before_touching_a_switch(capsys):
    assert main(["run", "leaf-spine", "--target", "linux", "--path-mode", "structured"]) == 2
    assert "kernel switches hash every EV" in capsys.readouterr().err


def test_ecmp_programs_no_path_tables(leaf_spine):
    scenario = RoutingScenario(leaf_spine, "reactive")

    async def body() -> None:
        for intent in scenario.fake.intents.values():
            assert intent.ev_field is None and not intent.ev_uplinks and not intent.local_usids

    scenario.run(body)


def test_structured_tables_are_programmed_and_survive_a_cut(leaf_spine: Topology):
    scenario = RoutingScenario(leaf_spine, "reactive", PathMode.STRUCTURED)

    async def body() -> None:
        before = scenario.fake.intents["l1"]
        assert before.ev_field is not None
        assert (before.ev_field.shift, before.ev_field.width) == (16, 2)
        # Four field values toward l2, one per spine, in uplink order (ports 3-6).
        assert [entry.egress_port for entry in before.ev_uplinks] == [3, 4, 5, 6]
        scenario.set_link("l2", "s1", up=False)
        await settle()
        after = scenario.fake.intents["l1"]
        assert scenario.ports("l1", H3) == (4, 5, 6), "the hashed group reroutes"
        assert after.ev_uplinks == before.ev_uplinks, "the exact path through s1 stays"
        status = await collect_status(scenario.fabric)
        assert status["path_mode"] == "structured"
        assert (
            format_status(status)
            .splitlines()[1]
            .startswith("routing: reactive, paths: structured,")
        )

    scenario.run(body)
