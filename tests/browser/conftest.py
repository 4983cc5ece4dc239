"""Browser tests: Debian's Chromium driven by Playwright (``executable_path``: `playwright
install` cannot download browsers here). Every test skips with one line when either is
missing, or when the page's JavaScript is not installed (`make setup`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tools.live_page import chromium_args, chromium_path


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright not installed (make setup)"
    )
    executable = chromium_path()
    if executable is None:
        pytest.skip("chromium not installed (make setup installs Debian's chromium)")
    from testbed.live.server import missing_javascript

    missing = missing_javascript()
    if missing:
        pytest.skip(
            f"the live page's JavaScript is not installed ({', '.join(missing)}): make setup"
        )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=chromium_args())
        try:
            yield launched
        finally:
            launched.close()
