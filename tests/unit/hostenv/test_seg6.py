"""The seg6local probe answers in a throw-away namespace and leaves nothing behind; when the
kernel refuses, the reason names what it lacks."""

from __future__ import annotations

import os
import subprocess

import pytest

from hostenv.seg6 import seg6local_missing


@pytest.mark.skipif(os.geteuid() != 0, reason="the probe makes a network namespace: needs root")
def test_the_probe_leaves_no_namespace_and_says_what_is_missing() -> None:
    missing = seg6local_missing()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    assert "mrc6-" not in names.stdout
    if missing is not None:
        assert "seg6local" in missing and "CONFIG_IPV6_SEG6_LWTUNNEL" in missing


def test_without_a_namespace_the_probe_raises_permission_error(monkeypatch) -> None:
    def refuse(args, **kwargs):
        return subprocess.CompletedProcess(args, 1, b"", b"Operation not permitted")

    monkeypatch.setattr(subprocess, "run", refuse)
    with pytest.raises(PermissionError, match="namespace"):
        seg6local_missing()
