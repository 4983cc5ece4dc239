"""Which path modes kernel switches carry: ECMP always, SRv6 where the kernel routes uSID
carriers itself (seg6local NEXT-C-SID), structured EV never; a refusal says why."""

from __future__ import annotations

import pytest

from testbed import session
from testbed.session import check_linux_path_mode
from topologies.paths import PathMode


def test_ecmp_and_the_default_need_nothing_of_the_kernel(monkeypatch) -> None:
    def never(*_: object) -> None:
        raise AssertionError("ECMP must not probe the kernel")

    monkeypatch.setattr(session, "seg6local_missing", never)
    check_linux_path_mode(None)
    check_linux_path_mode(PathMode.ECMP)


def test_structured_ev_is_refused_on_kernel_switches() -> None:
    with pytest.raises(ValueError, match="structured needs the bmv2 target: kernel switches hash"):
        check_linux_path_mode(PathMode.STRUCTURED)


def test_srv6_is_refused_with_the_kernels_reason_and_taken_where_the_kernel_has_it(
    monkeypatch,
) -> None:
    reason = (
        "this kernel takes no seg6local NEXT-C-SID route (lwt encapsulation type not supported)"
    )
    monkeypatch.setattr(session, "seg6local_missing", lambda: reason)
    with pytest.raises(ValueError, match=r"srv6 needs the bmv2 target here: .*lwt encapsulation"):
        check_linux_path_mode(PathMode.SRV6)
    monkeypatch.setattr(session, "seg6local_missing", lambda: None)
    check_linux_path_mode(PathMode.SRV6)


def test_srv6_is_refused_when_the_kernel_cannot_be_probed(monkeypatch) -> None:
    def no_root() -> str | None:
        raise PermissionError("cannot create a network namespace (are you root?)")

    monkeypatch.setattr(session, "seg6local_missing", no_root)
    with pytest.raises(ValueError, match=r"could not be probed .*are you root"):
        check_linux_path_mode(PathMode.SRV6)
