"""How the live page's browser is found and launched: ``$CHROMIUM`` before Debian's
``chromium``, and without Chromium's sandbox only as root (which it refuses otherwise)."""

from __future__ import annotations

import pytest

from tools import live_page


def test_chromium_is_taken_from_CHROMIUM_before_the_path(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(live_page.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setenv("CHROMIUM", "/opt/chromium/chrome")
    assert live_page.chromium_path() == "/opt/chromium/chrome"
    monkeypatch.delenv("CHROMIUM")
    assert live_page.chromium_path() == "/usr/bin/chromium"


@pytest.mark.parametrize(("uid", "sandboxed"), [(0, False), (1000, True)])
def test_only_root_runs_chromium_without_its_sandbox(
    monkeypatch: pytest.MonkeyPatch, uid: int, sandboxed: bool
):
    monkeypatch.setattr(live_page.os, "geteuid", lambda: uid)
    args = live_page.chromium_args()
    assert ("--no-sandbox" not in args) is sandboxed
    assert set(live_page.CHROMIUM_FLAGS) <= set(args)
