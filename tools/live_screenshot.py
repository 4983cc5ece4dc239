"""The README's figure of the live view: ``python -m tools.live_screenshot [--output PATH]``
(``make live-screenshot``) writes ``docs/figures/live-view.png``.

A ``leaf-spine`` testbed on the linux target (the target any machine with Mininet has) serves
its live page; headless Chromium opens it and plays the scene the browser test plays
(:func:`tools.live_page.cut_during_a_transfer`: a transfer h1 -> h3 from the page, a spine
link cut while it runs, an EV hovered with its path drawn), then the page is photographed.
Tests never write the figure: it changes only when this is run.

Needs root, Mininet, Debian's chromium, playwright and the page's JavaScript, like the browser
tests; exit status 3, with the reason, when one of them is missing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from tools.live_page import VIEWPORT, chromium_args, chromium_path, cut_during_a_transfer, load

REPO = Path(__file__).resolve().parents[1]
FIGURE = REPO / "docs" / "figures" / "live-view.png"
TOPOLOGY = "leaf-spine"
TARGET = "linux"
#: The link the scene cuts: a spine's downlink into the destination's leaf.
CUT_LINK = "l2:4<->s2:2"
EXIT_UNAVAILABLE = 3


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tools.live_screenshot")
    parser.add_argument("--output", type=Path, default=FIGURE, help=f"default: {FIGURE}")
    args = parser.parse_args(argv)
    chromium = chromium_path()
    if chromium is None:
        return _unavailable("chromium not installed (make setup)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return _unavailable("playwright not installed (make setup)")
    from testbed.live import live_view
    from testbed.session import Testbed
    from testbed.targets import TargetUnavailable

    lines: list[str] = []
    try:
        with (
            Testbed.open(TOPOLOGY, TARGET) as testbed,
            live_view(testbed, port=0, say=lines.append) as server,
        ):
            if server is None:
                return _unavailable("; ".join(lines))
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=chromium_args())
                try:
                    page = browser.new_page(viewport=VIEWPORT)
                    load(page, server.url)
                    cut_during_a_transfer(page, CUT_LINK)
                    args.output.parent.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(args.output))
                finally:
                    browser.close()
    except TargetUnavailable as error:
        return _unavailable(str(error))
    print(f"live_screenshot: wrote {args.output}")
    return 0


def _unavailable(reason: str) -> int:
    print(f"live_screenshot: {reason}", file=sys.stderr)
    return EXIT_UNAVAILABLE


if __name__ == "__main__":
    sys.exit(main())
