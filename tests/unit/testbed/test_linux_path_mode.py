"""The testbed refuses a path mode kernel switches cannot carry before bringing anything up,
with PathModeUnavailable (a ValueError) and the linux southbound's own reason
(controller/southbound/linux/path_modes.py says which modes and why)."""

from __future__ import annotations

import pytest

from controller.southbound.linux import path_modes
from testbed.mininet.switch_target import switch_target
from testbed.targets import PathModeUnavailable, check_path_mode
from topologies.paths import PathMode

LINUX = switch_target("linux")


def test_a_refused_mode_raises_path_mode_unavailable_with_the_reason(monkeypatch) -> None:
    monkeypatch.setattr(path_modes, "seg6local_missing", lambda: "this kernel takes no seg6local")
    with pytest.raises(PathModeUnavailable, match="kernel switches hash every EV"):
        check_path_mode(LINUX, PathMode.STRUCTURED)
    with pytest.raises(ValueError, match=r"seg6local routes, and this kernel takes no seg6local"):
        check_path_mode(LINUX, PathMode.SRV6)


def test_a_mode_the_kernel_carries_passes(monkeypatch) -> None:
    monkeypatch.setattr(path_modes, "seg6local_missing", lambda: None)
    check_path_mode(LINUX, None)
    check_path_mode(LINUX, PathMode.ECMP)
    check_path_mode(LINUX, PathMode.SRV6)
