"""The seg6local probe answers in a throw-away namespace and leaves nothing behind; when the
kernel refuses, the reason names what it lacks: seg6local itself, a dummy interface to hang
the routes on, or (before Linux 6.1) the NEXT-C-SID flavour, which an old kernel drops
silently."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable

import pytest

from hostenv import seg6
from hostenv.seg6 import seg6local_missing


@pytest.fixture(autouse=True)
def fresh_probe() -> None:
    """Each test probes its own (fake) kernel: forget what an earlier one answered."""
    seg6local_missing.cache_clear()


@pytest.mark.skipif(os.geteuid() != 0, reason="the probe makes a network namespace: needs root")
def test_the_probe_leaves_no_namespace_and_says_what_is_missing() -> None:
    missing = seg6local_missing()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    assert "mrc6-" not in names.stdout
    if missing is not None:
        assert "seg6local" in missing or "NEXT-C-SID" in missing


Answer = Callable[[list[str]], tuple[int, str, str]]


def _fake_ip(monkeypatch: pytest.MonkeyPatch, answer: Answer) -> list[list[str]]:
    """Every ``ip`` command answered by ``answer`` (rc, stdout, stderr); the commands run."""
    calls: list[list[str]] = []

    def run(args: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        rc, out, err = answer(args)
        return subprocess.CompletedProcess(args, rc, out, err)

    monkeypatch.setattr(seg6.subprocess, "run", run)
    return calls


SHOWN_WITH_FLAVOUR = (
    "fcbb:bb00:1::/48  encap seg6local action End flavors next-csid lblen 32 nflen 16 "
    "dev probe0 metric 1024 pref medium\n"
)


def _kernel(*, seg6local=True, dummy=True, keeps_flavour=True) -> Answer:
    def answer(args: list[str]) -> tuple[int, str, str]:
        if "seg6local" in args and "lo" in args and not seg6local:
            return 2, "", "Error: lwt encapsulation type not supported.\n"
        if "dummy" in args and not dummy:
            return 2, "", "Error: Unknown device type.\n"
        if "show" in args:
            shown = SHOWN_WITH_FLAVOUR
            return 0, shown if keeps_flavour else shown.replace("flavors next-csid ", ""), ""
        return 0, "", ""

    return answer


def test_a_kernel_with_seg6local_dummy_and_the_flavour_passes(monkeypatch) -> None:
    calls = _fake_ip(monkeypatch, _kernel())
    assert seg6local_missing() is None
    assert calls[-1][:3] == ["ip", "netns", "del"], "the namespace is removed"


def test_without_seg6local_the_reason_is_the_kernels_own(monkeypatch) -> None:
    calls = _fake_ip(monkeypatch, _kernel(seg6local=False))
    missing = seg6local_missing()
    assert missing is not None
    assert "lwt encapsulation type not supported" in missing
    assert "CONFIG_IPV6_SEG6_LWTUNNEL" in missing
    assert calls[-1][:3] == ["ip", "netns", "del"]


def test_without_dummy_interfaces_the_reason_says_so(monkeypatch) -> None:
    _fake_ip(monkeypatch, _kernel(dummy=False))
    missing = seg6local_missing()
    assert missing is not None and "no dummy interface" in missing and "CONFIG_DUMMY" in missing


def test_a_kernel_that_drops_the_flavour_is_refused(monkeypatch) -> None:
    _fake_ip(monkeypatch, _kernel(keeps_flavour=False))
    missing = seg6local_missing()
    assert missing is not None and "drops the NEXT-C-SID flavour" in missing


def test_without_a_namespace_the_probe_raises_permission_error(monkeypatch) -> None:
    _fake_ip(monkeypatch, lambda args: (1, "", "Operation not permitted"))
    with pytest.raises(PermissionError, match="namespace"):
        seg6local_missing()


def test_a_hanging_ip_is_an_os_error_and_the_namespace_is_still_removed(monkeypatch) -> None:
    calls: list[list[str]] = []

    def run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        if "route" in args:
            raise subprocess.TimeoutExpired(args, 10)
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(seg6.subprocess, "run", run)
    with pytest.raises(OSError, match="probing seg6local routes"):
        seg6local_missing()
    assert calls[-1][:3] == ["ip", "netns", "del"]


def test_the_kernels_answer_is_probed_once_per_process(monkeypatch) -> None:
    calls = _fake_ip(monkeypatch, _kernel(seg6local=False))
    first = seg6local_missing()
    probed = len(calls)
    assert seg6local_missing() == first
    assert len(calls) == probed, "the second ask ran no ip command"
