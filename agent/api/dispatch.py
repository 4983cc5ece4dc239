"""Routing a host-API client's request lines to its session's operations: the op table, the
privilege check for the controller's ops, and errors answered (or, for the unanswered posts,
pushed) naming the field."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any, Final

from agent.api.ctl_ops import ControllerSession
from agent.api.errors import ApiError, InvalidArgument, NotSupported, PermissionDenied
from agent.api.resources import MAX_UNREAD_BYTES
from agent.io.json_lines import Message

log = logging.getLogger(__name__)


Handler = Callable[["ApiSession", int, Message], dict[str, Any] | None]


class ApiSession(ControllerSession):
    """One control-socket client's host-API objects and operations."""

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
                self.reply(request, result)
        except ApiError as exc:
            if op in ASYNC_OPS:
                self.push({"p": "err", "op": op, "error": exc.to_json()})
            else:
                self.send({"id": request, "ok": False, "error": exc.to_json()})
        finally:
            for fd in fds:
                os.close(fd)
        if self.control.channel.pending_bytes > MAX_UNREAD_BYTES:
            log.warning("host API client does not read its completions: dropped")
            self.control.close()


OPS: dict[str, Handler] = {
    "api.open": ApiSession.op_open,
    "api.query_device": ApiSession.op_query_device,
    "api.query_port": ApiSession.op_query_port,
    "api.channel.create": ApiSession.op_channel_create,
    "api.channel.destroy": ApiSession.op_channel_destroy,
    "api.cq.create": ApiSession.op_cq_create,
    "api.cq.destroy": ApiSession.op_cq_destroy,
    "api.cq.notify": ApiSession.op_cq_notify,
    "api.pd.alloc": ApiSession.op_pd_alloc,
    "api.pd.dealloc": ApiSession.op_pd_dealloc,
    "api.mr.reg": ApiSession.op_mr_reg,
    "api.mr.dereg": ApiSession.op_mr_dereg,
    "api.qp.create": ApiSession.op_qp_create,
    "api.qp.modify": ApiSession.op_qp_modify,
    "api.qp.query": ApiSession.op_qp_query,
    "api.qp.destroy": ApiSession.op_qp_destroy,
    "api.post_send": ApiSession.op_post_send,
    "api.post_recv": ApiSession.op_post_recv,
    "api.ctl.query_device": ApiSession.op_ctl_query_device,
    "api.ctl.query_port": ApiSession.op_query_port,
    "api.ctl.modify_port": ApiSession.op_ctl_modify_port,
    "api.ctl.fmt.modify": ApiSession.op_ctl_fmt_modify,
    "api.ctl.fmt.query": ApiSession.op_ctl_fmt_query,
    "api.ctl.ev.modify": ApiSession.op_ctl_ev_modify,
    "api.ctl.ev.query": ApiSession.op_ctl_ev_query,
    "api.ctl.cc.modify": ApiSession.op_ctl_cc_modify,
    "api.ctl.cc.query": ApiSession.op_ctl_cc_query,
    "api.ctl.ev_cq.create": ApiSession.op_ctl_ev_cq_create,
    "api.ctl.ep_batch": ApiSession.op_ctl_ep_batch,
}
CTL_OPS: Final = frozenset(op for op in OPS if op.startswith("api.ctl."))
APP_OPS: Final = frozenset(OPS) - CTL_OPS
#: Ops answered later or never: posts and arming are fire-and-forget (errors come back as
#: completions or an ``err`` line), a probe batch is answered when it ends.
ASYNC_OPS: Final = frozenset({"api.post_send", "api.post_recv", "api.cq.notify"})
