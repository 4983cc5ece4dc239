"""The controller's target registry: each target declared once, with its capabilities; the
default first; names checked against it, and every setting a built-in target reads present in
the controller's configuration."""

from __future__ import annotations

from typing import Protocol

import pytest

from controller.app.config import ControllerConfig
from controller.southbound.bmv2 import Bmv2Settings
from controller.southbound.interface import LinkEvidence
from controller.southbound.linux.target import LinuxSettings
from controller.southbound.target import Feature
from controller.southbound.tofino.target import TofinoSettings
from controller.targets import (
    BUILTIN_TARGETS,
    DEFAULT_TARGET,
    controller_target,
    register_target,
    target_names,
    unregister_target,
)
from topologies.paths import PathMode


def test_the_built_in_targets_are_registered_the_default_first() -> None:
    assert target_names()[:3] == ("bmv2", "linux", "tofino")
    assert DEFAULT_TARGET == "bmv2" == ControllerConfig().target


def test_an_unknown_target_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown target 'netfpga': choose bmv2, linux, tofino"):
        controller_target("netfpga")


def test_a_taken_name_is_refused_and_a_built_in_target_cannot_be_removed() -> None:
    with pytest.raises(ValueError, match="'linux' is registered already"):
        register_target(BUILTIN_TARGETS[1])
    unregister_target("linux")
    assert "linux" in target_names()


def test_bmv2_does_everything_and_finds_links_by_probes() -> None:
    bmv2 = controller_target("bmv2").capabilities
    assert all(bmv2.has(feature) for feature in Feature)
    assert bmv2.ecn.marker(None) == "mrc.p4" and not bmv2.ecn.by_kernel
    assert bmv2.link_evidence is LinkEvidence.PROBES and bmv2.hardware is None
    assert all(bmv2.path_mode_refusal(mode) is None for mode in PathMode)


def test_linux_lacks_what_kernel_switches_lack_and_finds_links_by_carrier() -> None:
    linux = controller_target("linux").capabilities
    assert not (linux.trimming or linux.dscp_classes or linux.member_counters or linux.restart)
    assert linux.lacks[Feature.RESTART] == "a kernel switch has no process to kill"
    assert linux.ecn.by_kernel and linux.ecn.qdiscs[0] == "red"
    assert linux.link_evidence is LinkEvidence.CARRIER and linux.hardware is None
    assert "kernel switches hash every EV" in (linux.path_mode_refusal(PathMode.STRUCTURED) or "")


def test_tofino_is_hardware_the_testbed_cannot_start() -> None:
    tofino = controller_target("tofino").capabilities
    assert tofino.hardware is not None and "no Tofino switch to start here" in tofino.hardware
    assert tofino.trimming and tofino.link_evidence is LinkEvidence.PROBES


def _members(protocol: type) -> set[str]:
    return {
        name
        for cls in protocol.__mro__
        if cls not in (Protocol, object) and Protocol in cls.__mro__
        for name in vars(cls)
        if not name.startswith("_")
    }


@pytest.mark.parametrize("settings", [Bmv2Settings, LinuxSettings, TofinoSettings])
def test_the_configuration_carries_every_setting_a_built_in_target_reads(settings: type) -> None:
    members = _members(settings)
    assert members
    config = ControllerConfig()
    assert [name for name in sorted(members) if not hasattr(config, name)] == []
