"""The live page in headless Chromium (Debian's, driven by Playwright), as the browser tests
and ``make live-screenshot`` drive it: launch options, the page's own operations (tap a node
or link, start a transfer, hover an EV), and the README figure's scene.

Playwright cannot download browsers here (``playwright install``), so Debian's ``chromium``
is launched by path (``executable_path``); as root it needs ``--no-sandbox``. The page objects
are Playwright's ``Page``; this module does not import Playwright at run time, so that what
lacks it can say so in its own way (a test skips, a tool exits).
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import ViewportSize

CHROMIUM_FLAGS = (
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
#: The window the tests and the README figure look through.
VIEWPORT: ViewportSize = {"width": 1500, "height": 860}
#: A link the page cut is drawn down within this.
SHOWN_WITHIN_MS = 2000
#: From clicking an action's button to the server's answer on the page.
ACTION_ANSWERED_MS = 10_000
#: From asking for a transfer to its first EVs and goodput on the page.
TRANSFER_SHOWN_MS = 20_000
#: A path on bmv2 is read from every switch on it over Thrift, one CLI process each.
PATH_ANSWERED_MS = 45_000


def chromium_path() -> str | None:
    """Debian's Chromium, or ``$CHROMIUM``; None when neither is there."""
    return os.environ.get("CHROMIUM") or shutil.which("chromium")


def chromium_args() -> list[str]:
    """The launch flags: quiet, and ``--no-sandbox`` as root (Chromium refuses it otherwise)."""
    return [*CHROMIUM_FLAGS, *(["--no-sandbox"] if os.geteuid() == 0 else [])]


def load(page: Any, url: str) -> None:
    """Open the live page at ``url`` and return once it has drawn its first update."""
    page.goto(url)
    page.wait_for_function("window.liveView && window.liveView.updates > 0")


def state_is(page: Any, link: str, state: str, timeout: int) -> None:
    """Wait until the page draws ``link`` in ``state`` (Playwright's TimeoutError after
    ``timeout`` ms)."""
    page.wait_for_function(
        "([id, state]) => window.liveView.cy.getElementById(id).data('state') === state",
        arg=[link, state],
        timeout=timeout,
    )


def answered(page: Any, prefix: str, timeout: int) -> None:
    """Wait until the page shows the answer to its last action starting with ``prefix`` (the
    server performed it), Playwright's TimeoutError after ``timeout`` ms."""
    page.wait_for_function(
        "(prefix) => document.getElementById('action-result').textContent.startsWith(prefix)",
        arg=prefix,
        timeout=timeout,
    )


def tap(page: Any, element: str) -> None:
    """Select a node or link of the drawing, as a click on it does."""
    # Returns nothing: Playwright would serialise the cytoscape collection emit() returns.
    page.evaluate("(id) => { window.liveView.cy.getElementById(id).emit('tap'); }", element)


def hover_path(page: Any, cell: str = ".transfer .evgrid .ev >> nth=0") -> dict[str, Any]:
    """Hover the EV cell ``cell`` selects; the path the server answered."""
    page.hover(cell)
    page.wait_for_function(
        "window.liveView.hover && window.liveView.hover.path !== null",
        timeout=PATH_ANSWERED_MS,
    )
    result: dict[str, Any] = page.evaluate("window.liveView.hover.path")
    return result


def start_transfer(page: Any, seconds: str, evs: str = "") -> None:
    """Ask for a transfer h1 -> h3 with the page's form."""
    page.fill("#transfer-duration", seconds)
    page.fill("#transfer-evs", evs)
    page.select_option("#transfer-source", "h1")
    page.select_option("#transfer-destination", "h3")
    page.click("#transfer-start")


def cut_during_a_transfer(page: Any, link: str) -> dict[str, Any]:
    """The README figure's scene: an 8 s transfer h1 -> h3 started from the page and
    sending, ``link`` cut with the Fail button (drawn down within ``SHOWN_WITHIN_MS``), a
    refresh or two of goodput later the first EV hovered; the path the server answered."""
    start_transfer(page, "8")
    page.wait_for_selector(".evgrid .ev", timeout=TRANSFER_SHOWN_MS)
    page.wait_for_function(
        "window.liveView.update.connections.some(c => c.goodput_bps > 0)",
        timeout=TRANSFER_SHOWN_MS,
    )
    tap(page, link)
    page.click("#button-fail")
    state_is(page, link, "down", SHOWN_WITHIN_MS)
    page.wait_for_timeout(1500)  # a refresh or two of goodput with the link cut
    return hover_path(page)
