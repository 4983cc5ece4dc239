"""One host-API client's session in the agent: its parts, the op table that routes each
request line to one of them, and the session's end.

The session holds its parts rather than being them: what the client writes to
(``agent.api.outbox``), its objects (``agent.api.objects``), its QPs (``agent.api.qp_ops``),
its controller operations (``agent.api.ctl_ops``) and its profile operations
(``agent.api.profile_ops``). Each part is given only what it uses, from this client or from
what all clients share (``AgentWide``, built once by ``agent.api.service``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from agent.api.ctl_ops import ControllerOps, TellAll
from agent.api.device import Device
from agent.api.errors import ApiError, InvalidArgument, NotSupported, PermissionDenied
from agent.api.ev_states import EvStates
from agent.api.ids import IdSource
from agent.api.objects import ClientObjects
from agent.api.outbox import Outbox
from agent.api.probes import EvProbes
from agent.api.profile_ops import ProfileOps
from agent.api.profiles import ProfileRegistry
from agent.api.qp_ops import QpOps
from agent.api.resources import MAX_UNREAD_BYTES, adopt_socket
from agent.io.control_server import ControlSession
from agent.io.json_lines import Message
from agent.io.runtime import AgentRuntime

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentWide:
    """What every client's session shares."""

    runtime: AgentRuntime
    device: Device
    ids: IdSource
    registry: ProfileRegistry
    ev_states: EvStates
    probes: EvProbes
    #: An asynchronous event to every client (a port going up or down).
    tell_all: TellAll


class ApiSession:
    """One control-socket client's host-API objects and operations."""

    def __init__(self, control: ControlSession, agent: AgentWide) -> None:
        self.control = control
        self.device = agent.device
        self.outbox = Outbox(control.channel)
        self.objects = ClientObjects(self.outbox, agent.ids, agent.runtime.pool.default)
        self.qps = QpOps(agent.runtime, self.objects, self.outbox, agent.registry, agent.ev_states)
        self.controller = ControllerOps(
            agent.runtime, agent.device, agent.registry, agent.probes, self.outbox, agent.tell_all
        )
        self.profiles = ProfileOps(agent.registry, agent.ev_states)
        self.opened = False
        self._runtime = agent.runtime

    def open(self, message: Message) -> dict[str, Any]:
        """``api.open``: the context, with the socket its asynchronous events go to."""
        if self.opened:
            raise InvalidArgument("this connection has its context already", "op")
        self.outbox.async_sock = adopt_socket(message["_fds"], "async_fd")
        self.opened = True
        return {"device": self.device.attr(), "privileged": self.control.privileged}

    def _take_fds(self, message: Message) -> list[int]:
        count = message.get("fds", 0)
        if type(count) is not int or not 0 <= count <= 4:
            return []
        return self.control.channel.take_fds(count) or []

    def handle(self, message: Message) -> None:
        """Serve one request line; errors go back to the client naming the field."""
        raw_id = message.get("id")
        request = raw_id if type(raw_id) is int else 0
        op = message.get("op")
        handler = OPS.get(op) if isinstance(op, str) else None
        fds = self._take_fds(message)
        try:
            if handler is None:
                raise NotSupported(f"unknown op {op!r}", "op")
            if op in CTL_OPS and not self.control.privileged:
                raise PermissionDenied("the controller API is for root or the agent's user", "op")
            if not self.opened and op != "api.open":
                raise InvalidArgument("open a context first (api.open)", "op")
            result = handler(self, request, {**message, "_fds": fds})
            fds = []
            if result is not None and op not in ASYNC_OPS:
                self.outbox.reply(request, result)
        except ApiError as exc:
            if op in ASYNC_OPS:
                self.outbox.push({"p": "err", "op": op, "error": exc.to_json()})
            else:
                self.outbox.fail(request, exc)
        finally:
            for fd in fds:
                os.close(fd)
        if self.outbox.unread_bytes > MAX_UNREAD_BYTES:
            log.warning("host API client does not read its completions: dropped")
            self.control.close()

    def release(self) -> None:
        """The client is gone: its probes are forgotten, its QPs closed (their peers see them
        fail), its regions unmapped and its sockets closed."""
        self.controller.release()
        self.qps.release()
        self.objects.release()
        self.outbox.close()
        self._runtime.service()


#: An op's handler: the session, the request's id, the request.
Handler = Callable[[ApiSession, int, Message], dict[str, Any] | None]

OPS: Final[dict[str, Handler]] = {
    "api.open": lambda s, _, m: s.open(m),
    "api.query_device": lambda s, _, m: s.device.attr(),
    "api.query_port": lambda s, _, m: s.device.query_port(m),
    "api.channel.create": lambda s, _, m: s.objects.create_channel(m),
    "api.channel.destroy": lambda s, _, m: s.objects.destroy_channel(m),
    "api.cq.create": lambda s, _, m: s.objects.create_cq(m),
    "api.cq.destroy": lambda s, _, m: s.objects.destroy_cq(m),
    "api.cq.notify": lambda s, _, m: s.objects.notify_cq(m),
    "api.pd.alloc": lambda s, _, m: s.objects.alloc_pd(),
    "api.pd.dealloc": lambda s, _, m: s.objects.dealloc_pd(m),
    "api.mr.reg": lambda s, _, m: s.objects.reg_mr(m),
    "api.mr.dereg": lambda s, _, m: s.objects.dereg_mr(m),
    "api.qp.create": lambda s, _, m: s.qps.create(m),
    "api.qp.modify": lambda s, _, m: s.qps.modify(m),
    "api.qp.query": lambda s, _, m: s.qps.query(m),
    "api.qp.destroy": lambda s, _, m: s.qps.destroy(m),
    "api.post_send": lambda s, _, m: s.qps.post_send(m),
    "api.post_recv": lambda s, _, m: s.qps.post_recv(m),
    "api.ctl.query_device": lambda s, _, m: s.controller.query_device(),
    "api.ctl.query_port": lambda s, _, m: s.device.query_port(m),
    "api.ctl.modify_port": lambda s, _, m: s.controller.modify_port(m),
    "api.ctl.fmt.modify": lambda s, _, m: s.profiles.modify_format(m),
    "api.ctl.fmt.query": lambda s, _, m: s.profiles.query_format(m),
    "api.ctl.ev.modify": lambda s, _, m: s.profiles.modify_ev(m),
    "api.ctl.ev.query": lambda s, _, m: s.profiles.query_ev(m),
    "api.ctl.cc.modify": lambda s, _, m: s.profiles.modify_cc(m),
    "api.ctl.cc.query": lambda s, _, m: s.profiles.query_cc(m),
    "api.ctl.ev_cq.create": lambda s, _, m: s.objects.create_ev_cq(m),
    "api.ctl.ep_batch": lambda s, request, m: s.controller.ep_batch(request, m),
}
CTL_OPS: Final = frozenset(op for op in OPS if op.startswith("api.ctl."))
APP_OPS: Final = frozenset(OPS) - CTL_OPS
#: Ops answered later or never: posts and arming are fire-and-forget (errors come back as
#: completions or an ``err`` line), a probe batch is answered when it ends.
ASYNC_OPS: Final = frozenset({"api.post_send", "api.post_recv", "api.cq.notify"})
