"""Choosing the target: ``--target linux`` / ``target: linux`` with a namespace prefix, no
pipeline files needed, settings that only make sense for gRPC refused, and bad values named."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller import cli
from controller.app.config import ConfigError, ControllerConfig, load_config
from controller.app.eventlog import EventLog
from controller.app.runtime import build_fabric, build_southbound, check_compatible
from controller.southbound.grpc_settings import TlsConfig
from controller.southbound.interface import LinkEvidence
from controller.southbound.linux.southbound import LinuxSouthbound
from controller.southbound.p4runtime import P4RuntimeSouthbound
from topologies import Topology


def test_bmv2_is_the_default_target() -> None:
    assert ControllerConfig().target == "bmv2"
    assert ControllerConfig().netns_prefix == ""


def test_target_and_prefix_come_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("target: linux\nnetns_prefix: mn3fa2\n")
    config = load_config(path)
    assert (config.target, config.netns_prefix) == ("linux", "mn3fa2")


def test_an_unknown_target_is_named_with_the_valid_ones(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("target: netfpga\n")
    with pytest.raises(
        ConfigError, match="target must be one of bmv2, linux, tofino, not 'netfpga'"
    ):
        load_config(path)


def test_tofino_is_a_target_of_the_file_and_of_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("target: tofino\n")
    assert load_config(path).target == "tofino"
    assert ControllerConfig().with_overrides(target="tofino").target == "tofino"


@pytest.mark.parametrize("prefix", ["a/b", "x y", "..\n"])
def test_a_prefix_that_cannot_name_a_namespace_is_refused(prefix: str) -> None:
    with pytest.raises(ConfigError, match="netns_prefix"):
        ControllerConfig().with_overrides(netns_prefix=prefix)


def test_command_line_overrides_choose_linux() -> None:
    config = ControllerConfig().with_overrides(target="linux", netns_prefix="")
    assert config.target == "linux" and config.netns_prefix == ""


def test_linux_needs_no_pipeline_files(leaf_spine: Topology, tmp_path: Path) -> None:
    config = ControllerConfig(
        target="linux", p4info=tmp_path / "missing.txtpb", p4blob=tmp_path / "missing.json"
    )
    check_compatible(leaf_spine, config)  # no error
    with pytest.raises(ConfigError, match="make build"):
        check_compatible(leaf_spine, ControllerConfig(p4info=tmp_path / "missing.txtpb"))


def test_grpc_only_settings_are_refused_on_linux(leaf_spine: Topology, tmp_path: Path) -> None:
    config = ControllerConfig(
        target="linux", switch_hosts={"l1": "10.0.0.9"}, tls=TlsConfig(tmp_path / "ca")
    )
    with pytest.raises(ConfigError, match="switch_hosts, tls: no meaning on the linux target"):
        check_compatible(leaf_spine, config)


def test_each_target_gets_its_southbound_and_link_evidence(leaf_spine: Topology) -> None:
    linux = ControllerConfig(target="linux", netns_prefix="mnab")
    southbound = build_southbound(leaf_spine, linux)
    assert isinstance(southbound, LinuxSouthbound)
    assert southbound.namespace("s1") == "mnab-s1"
    assert isinstance(build_southbound(leaf_spine, ControllerConfig()), P4RuntimeSouthbound)
    log = EventLog.open(None)
    assert build_fabric(leaf_spine, linux, log).discovery.evidence is LinkEvidence.CARRIER
    assert build_fabric(leaf_spine, ControllerConfig(), log).discovery.evidence is (
        LinkEvidence.PROBES
    )


def test_cli_refuses_an_unknown_target_before_touching_anything(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["run", "leaf-spine", "--target", "netfpga"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'netfpga'" in capsys.readouterr().err


def test_cli_accepts_tofino_and_asks_for_the_compiled_program_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = cli.main(["run", "leaf-spine", "--target", "tofino"])
    assert status == cli.EXIT_USAGE
    assert "the tofino target needs tofino.program" in capsys.readouterr().err


def test_cli_reports_grpc_settings_with_linux_as_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("switch_hosts: {l1: 10.0.0.9}\n")
    status = cli.main(["run", "leaf-spine", "--target", "linux", "--config", str(config)])
    assert status == cli.EXIT_USAGE
    assert "no meaning on the linux target" in capsys.readouterr().err
