"""``make live-screenshot`` writes the README's figure only when asked, where asked, and
exits 3 with the reason, writing nothing, where it cannot take it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import live_page, live_screenshot


def test_the_figure_is_the_readmes():
    readme = (live_screenshot.REPO / "README.md").read_text()
    assert live_screenshot.FIGURE.relative_to(live_screenshot.REPO).as_posix() in readme


def test_without_chromium_it_exits_3_and_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.delenv("CHROMIUM", raising=False)
    monkeypatch.setattr(live_page.shutil, "which", lambda name: None)
    output = tmp_path / "figure.png"
    assert live_screenshot.main(["--output", str(output)]) == live_screenshot.EXIT_UNAVAILABLE
    assert "chromium not installed" in capsys.readouterr().err
    assert not output.exists()
