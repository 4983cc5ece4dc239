"""Which path modes kernel switches carry: ECMP always, SRv6 where the kernel routes uSID
carriers itself (seg6local NEXT-C-SID), structured EV never; a refusal says why. The controller,
the testbed and the experiments all ask this one function."""

from __future__ import annotations

import pytest

from controller.southbound.linux import path_modes
from controller.southbound.linux.path_modes import linux_path_mode_refusal
from topologies.paths import PathMode


def test_ecmp_and_the_default_need_nothing_of_the_kernel(monkeypatch) -> None:
    def never() -> str | None:
        raise AssertionError("ECMP must not probe the kernel")

    monkeypatch.setattr(path_modes, "seg6local_missing", never)
    assert linux_path_mode_refusal(None) is None
    assert linux_path_mode_refusal(PathMode.ECMP) is None


def test_structured_ev_is_refused_on_kernel_switches() -> None:
    refusal = linux_path_mode_refusal(PathMode.STRUCTURED)
    assert refusal is not None and "kernel switches hash every EV" in refusal


def test_srv6_is_refused_with_the_kernels_reason_and_taken_where_the_kernel_has_it(
    monkeypatch,
) -> None:
    reason = (
        "this kernel takes no seg6local NEXT-C-SID route (lwt encapsulation type not supported)"
    )
    monkeypatch.setattr(path_modes, "seg6local_missing", lambda: reason)
    refusal = linux_path_mode_refusal(PathMode.SRV6)
    assert refusal is not None
    assert refusal.startswith("path mode srv6 needs a P4 target here")
    assert refusal.endswith(f"seg6local routes, and {reason}")
    monkeypatch.setattr(path_modes, "seg6local_missing", lambda: None)
    assert linux_path_mode_refusal(PathMode.SRV6) is None


def test_srv6_is_refused_when_the_kernel_cannot_be_probed(monkeypatch) -> None:
    def no_root() -> str | None:
        raise PermissionError("cannot create a network namespace (are you root?)")

    monkeypatch.setattr(path_modes, "seg6local_missing", no_root)
    refusal = linux_path_mode_refusal(PathMode.SRV6)
    assert refusal is not None
    assert "cannot tell whether this kernel routes uSID carriers" in refusal
    assert "are you root?" in refusal


@pytest.mark.parametrize("mode", list(PathMode))
def test_every_mode_has_an_answer(mode: PathMode, monkeypatch) -> None:
    monkeypatch.setattr(path_modes, "seg6local_missing", lambda: None)
    refusal = linux_path_mode_refusal(mode)
    assert (refusal is None) == (mode is not PathMode.STRUCTURED)
