"""The host API bound to an agent running in this process, for tests on a deterministic
network: the same protocol over a socketpair, with the agent's loop turned by ``pump``.

The application's calls wait by calling ``pump`` (which turns the agent's runtimes, on a
stepped clock if the test wants determinism) until the agent has answered, so a test drives
an application and its agents in one thread, and every byte still crosses a real socket with
its file descriptors, as with ``mrc-agent serve``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from agent.api.client import Context
from agent.api.controller import Controller
from agent.io.control_server import ControlServer


def open_in_process(server: ControlServer, pump: Callable[[], None]) -> Context:
    """A context on the agent behind ``server`` (its ``ApiService`` installed), in this
    process; the session is as privileged as ``server.is_privileged`` finds this process."""
    mine, theirs = socket.socketpair()
    try:
        server.adopt(theirs)
    except BaseException:
        mine.close()
        theirs.close()
        raise
    return Context(mine, pump, server.runtime.clock)


def controller_in_process(server: ControlServer, pump: Callable[[], None]) -> Controller:
    """A controller on the agent behind ``server``, in this process."""
    return Controller(open_in_process(server, pump))
