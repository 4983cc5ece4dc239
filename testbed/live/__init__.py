"""The live view: a web page of a running testbed (``testbed.live.server``), its topology
laid out by tier (``layout``), link state and load, controller events and every transfer's
EV set (``state``, fed by ``sources``: the controller's stream and the agents' status), with
buttons that do what the CLI does (``actions``) and EV paths asked of the switches (``paths``).

``live_view`` serves it for a ``Testbed`` for the length of a ``with`` block; the runner
(``make run-topology``) and the experiments (``LIVE=1``) use it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from testbed.live.server import LiveServer
    from testbed.session import Testbed

log = logging.getLogger(__name__)


@contextlib.contextmanager
def live_view(
    testbed: Testbed,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    say: Callable[[str], None] = print,
) -> Iterator[LiveServer | None]:
    """Serve the page of ``testbed`` (started) while the block runs; ``say`` gets one line:
    the page's URL, or why there is no page (the run goes on without it)."""
    try:
        from testbed.live.actions import TestbedActions, next_hops_of
        from testbed.live.server import LiveServer, LiveViewUnavailable
    except ImportError as error:  # aiohttp missing: `make setup` installs it
        say(f"live view: unavailable ({error}; run `make setup`)")
        yield None
        return
    assert testbed.controller is not None and testbed.agents is not None
    agents = testbed.agents

    def acting_socket() -> Path:
        # The controller acting when the page (re)subscribes: the backup once it took over.
        controller = testbed.controller
        assert controller is not None
        return controller.socket

    server = LiveServer(
        testbed.topology,
        acting_socket,
        {host_.name: agents.socket_of(host_.name) for host_ in testbed.topology.hosts},
        TestbedActions(testbed),
        host=host,
        port=port,
        token=token,
        next_hops=next_hops_of(testbed),
        jobs=testbed.jobs.snapshot,
    )
    try:
        url = server.start()
    except LiveViewUnavailable as error:
        say(f"live view: unavailable ({error})")
        yield None
        return
    say(f"live view: {url}")
    try:
        yield server
    finally:
        server.stop()
