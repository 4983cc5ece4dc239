"""Where the live page's data comes from, written into its :class:`LiveState`.

The controller's status subscription is followed for the whole run (events as they happen, a
status every refresh); while a page is open, each host agent's ``status`` with EV tables is
polled once per refresh over its control socket, together with what only the testbed knows
(the links it has cut, its collective jobs). Nothing but the controller's stream is read for
a page that is not open: the server decides when to poll.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.io.control_protocol import StatusRequest
from controller.app.status_socket import StatusUnavailable, open_subscription
from testbed.live.state import LiveState, describe_error

AGENT_TIMEOUT_S = 2.0
#: Longest line an agent's status may take (EV tables of many connections).
AGENT_LINE_LIMIT = 16 << 20
#: Wait before subscribing again after the controller's stream was lost.
RESUBSCRIBE_S = 1.0


async def follow_controller(
    socket: Path | Callable[[], Path],
    refresh_s: float,
    state: LiveState,
    on_event: Callable[[], None],
) -> None:
    """Keep a subscription to the controller on ``socket`` open until cancelled; on its loss
    say so on the page and subscribe again, to the socket ``socket()`` names then when it is
    a callable (a run with a backup controller: the one acting). ``on_event`` runs after
    each controller event (worth showing at once, not at the next refresh)."""
    while True:
        path = socket() if callable(socket) else socket
        try:
            async for message in open_subscription(path, refresh_s):
                if state.apply_controller(message):
                    on_event()
            state.controller_lost("the controller closed its status stream")
        except StatusUnavailable as error:
            state.controller_lost(str(error))
        except OSError as error:
            state.controller_lost(f"status stream failed: {error}")
        await asyncio.sleep(RESUBSCRIBE_S)


class AgentPoller:
    """One poll per call: every agent's status, and the testbed's cut links and jobs."""

    def __init__(
        self,
        state: LiveState,
        agent_sockets: dict[str, Path],
        cut_links: Callable[[], frozenset[str]] | None = None,
        jobs: Callable[[], list[dict[str, Any]]] | None = None,
        controllers: Callable[[], dict[str, str]] | None = None,
    ) -> None:
        """Poll the agents on ``agent_sockets`` (by host) into ``state``; ``cut_links`` and
        ``jobs`` are the testbed's own records, where there is a testbed."""
        self.state = state
        self.agent_sockets = dict(agent_sockets)
        self.cut_links = cut_links
        self.jobs = jobs
        self.controllers = controllers

    async def poll(self) -> None:
        """Ask every agent at once; one that does not answer is shown as unavailable."""
        if self.cut_links is not None:
            self.state.set_cut(self.cut_links())
        if self.jobs is not None:
            self.state.set_jobs(self.jobs())
        if self.controllers is not None:
            self.state.set_controllers(self.controllers())
        hosts = list(self.agent_sockets)
        results = await asyncio.gather(
            *(agent_status(self.agent_sockets[h]) for h in hosts), return_exceptions=True
        )
        for host, result in zip(hosts, results, strict=True):
            if isinstance(result, dict):
                self.state.apply_agent(host, result)
            else:
                self.state.agent_unavailable(host, describe_error(result))


async def agent_status(path: Path) -> dict[str, Any]:
    """One ``status`` with EV tables from the agent on ``path``."""
    reader, writer = await asyncio.wait_for(
        asyncio.open_unix_connection(str(path), limit=AGENT_LINE_LIMIT), AGENT_TIMEOUT_S
    )
    try:
        request = StatusRequest(evs=True).to_json(1)
        writer.write(json.dumps(request).encode() + b"\n")
        line = await asyncio.wait_for(reader.readline(), AGENT_TIMEOUT_S)
    finally:
        writer.close()
    reply = json.loads(line)
    if not isinstance(reply, dict) or reply.get("ok") is not True:
        error = reply.get("error") if isinstance(reply, dict) else None
        raise RuntimeError(f"the agent refused: {error}")
    result = reply.get("result")
    if not isinstance(result, dict):
        raise RuntimeError("the agent sent no status")
    return result
