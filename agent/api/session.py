"""One host-API client's session in the agent: its lifetime and its registry of objects.

``SessionBase`` holds what a control-socket client made (channels, CQs, PDs, regions, and the
QPs ``agent.api.qp_ops`` drives), writes its replies, completions and wake-ups, and releases
everything when the client goes. The application's QP operations and the controller's build on
it (``agent.api.qp_ops``, ``agent.api.ctl_ops``); ``agent.api.dispatch`` routes requests.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import mmap
import os
import socket
from typing import TYPE_CHECKING, Any

from agent.api.errors import Busy, InvalidArgument, NotFound, NotSupported, OutOfResources
from agent.api.qp_timing import active_mtu
from agent.api.requests import U32, U64, int_field
from agent.api.resources import (
    MAX_CHANNELS,
    MAX_CQE,
    MAX_CQS,
    MAX_PDS,
    MAX_REGIONS,
    MAX_UNREAD_BYTES,
    MAX_WIMM,
    PROTOCOL_VERSION_1,
    ChannelRecord,
    CqRecord,
    QpRecord,
    RegionRecord,
    map_region,
    unmapped,
)
from agent.api.types import DEVICE_CAP_TRIM_NACK, Access, CtlEvState, Ev, EventType
from agent.io.addresses import format_address
from agent.io.control_server import ControlSession
from agent.io.json_lines import Message, encode_line

if TYPE_CHECKING:
    from agent.api.service import ApiService

log = logging.getLogger(__name__)


class SessionBase:
    """One control-socket client's objects, its lines out, and its release."""

    def __init__(self, service: ApiService, control: ControlSession) -> None:
        self.service = service
        self.control = control
        self.runtime = service.runtime
        self.opened = False
        self.async_sock: socket.socket | None = None
        self.channels: dict[int, ChannelRecord] = {}
        self.cqs: dict[int, CqRecord] = {}
        self.pds: set[int] = set()
        self.regions: dict[int, RegionRecord] = {}
        self.qps: dict[int, QpRecord] = {}
        self._zombies: list[mmap.mmap] = []
        self._next_handle = 1
        self._send_errors = 0
        #: QPs whose send queue moved with no completion to say so, told once per reactor turn.
        self._sq_moved: dict[int, QpRecord] = {}

    # --- plumbing -----------------------------------------------------------------------------

    def _take_fds(self, message: Message) -> list[int]:
        count = message.get("fds", 0)
        if type(count) is not int or not 0 <= count <= 4:
            return []
        return self.control.channel.take_fds(count) or []

    def send(self, message: Message) -> None:
        """A line to the client."""
        self.control.channel.send(message)

    def reply(self, request: int, result: dict[str, Any]) -> None:
        """The answer to request ``request``."""
        self.send({"id": request, "ok": True, "result": result})

    def push(self, message: Message) -> None:
        """An unrequested line (completions, QP errors, EV events)."""
        self.send(message)

    def _new_handle(self) -> int:
        handle = self._next_handle
        self._next_handle += 1
        return handle

    def _write(self, sock: socket.socket | None, message: Message) -> None:
        """A line on a channel or the async-event socket; dropped if the client does not
        read it (it then has older wake-ups pending)."""
        if sock is None:
            return
        try:
            sock.send(encode_line(message))
        except OSError as exc:
            self._send_errors += 1
            if self._send_errors == 1 or exc.errno not in (errno.EAGAIN, errno.EPIPE):
                log.warning("host API client: a wake-up could not be written: %s", exc)

    def async_event(self, kind: EventType, element: int, reason: str = "") -> None:
        """An asynchronous event for this client (``mrc_get_async_event``)."""
        self._write(self.async_sock, {"t": int(kind), "e": element, "r": reason})

    def _adopt_socket(self, fds: list[int], where: str) -> socket.socket:
        if len(fds) != 1:
            raise InvalidArgument("expected one socket descriptor with the request", where)
        fd = fds.pop()
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            os.close(fd)
            raise InvalidArgument("the descriptor is not a socket", where) from None
        if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
            sock.close()
            raise InvalidArgument("must be a Unix stream socket", where)
        sock.setblocking(False)
        return sock

    # --- context ------------------------------------------------------------------------------

    def op_open(self, _request: int, message: Message) -> dict[str, Any]:
        if self.opened:
            raise InvalidArgument("this connection has its context already", "op")
        self.async_sock = self._adopt_socket(message["_fds"], "async_fd")
        self.opened = True
        return {"device": self.device_attr(), "privileged": self.control.privileged}

    def device_attr(self) -> dict[str, Any]:
        config = self.runtime.pool.default.config
        return {
            "mrc_protocol_version": PROTOCOL_VERSION_1,
            "max_wimm": MAX_WIMM,
            "max_wimm_dest": MAX_WIMM,
            "max_mpr": config.max_psn_window // 128,
            "mpr_resolution": 1,
            "max_qp_hint": 0,
            "cap": DEVICE_CAP_TRIM_NACK,
            "max_qp_wr": config.max_unconfirmed_messages,
            "max_cqe": MAX_CQE,
            "ports": [format_address(a) for a in self.runtime.local_addresses],
        }

    def op_query_device(self, _request: int, _message: Message) -> dict[str, Any]:
        return self.device_attr()

    def _port(self, message: Message) -> int:
        return int_field(message, "port", 1, self.service.planes, "port_num") - 1

    def op_query_port(self, _request: int, message: Message) -> dict[str, Any]:
        plane = self._port(message)
        pool = self.runtime.pool
        return {
            "port_num": plane + 1,
            "state": "ACTIVE" if pool.plane_up(plane) else "DOWN",
            "port_admin_state": "ENABLED" if pool.plane_admin(plane) else "DISABLED",
            "gid": format_address(self.runtime.local_addresses[plane]),
            "active_mtu": active_mtu(pool.default.config.payload_size),
        }

    # --- channels, CQs, PDs -------------------------------------------------------------------

    def op_channel_create(self, _request: int, message: Message) -> dict[str, Any]:
        if len(self.channels) >= MAX_CHANNELS:
            raise OutOfResources(f"at most {MAX_CHANNELS} completion channels", "channel")
        sock = self._adopt_socket(message["_fds"], "fd")
        handle = self._new_handle()
        self.channels[handle] = ChannelRecord(handle, sock)
        return {"channel": handle}

    def _channel(self, message: Message, key: str = "channel") -> ChannelRecord:
        handle = int_field(message, key, 0, U32)
        channel = self.channels.get(handle)
        if channel is None:
            raise NotFound(f"no completion channel {handle}", key)
        return channel

    def op_channel_destroy(self, _request: int, message: Message) -> dict[str, Any]:
        channel = self._channel(message)
        if channel.users:
            raise Busy(f"{channel.users} CQs use it", "channel")
        del self.channels[channel.handle]
        channel.sock.close()
        return {}

    def op_cq_create(self, _request: int, message: Message) -> dict[str, Any]:
        if len(self.cqs) >= MAX_CQS:
            raise OutOfResources(f"at most {MAX_CQS} CQs", "cq")
        cqe = int_field(message, "cqe", 1, MAX_CQE)
        channel = self._channel(message) if message.get("channel") is not None else None
        handle = self._new_handle()
        self.cqs[handle] = CqRecord(handle, cqe, channel, bool(message.get("ev_events")))
        if channel is not None:
            channel.users += 1
        return {"cq": handle, "cqe": cqe}

    def _cq(self, message: Message, key: str = "cq", events: bool = False) -> CqRecord:
        handle = int_field(message, key, 0, U32)
        cq = self.cqs.get(handle)
        if cq is None or cq.events != events:
            raise NotFound(f"no {'EV event ' if events else ''}CQ {handle}", key)
        return cq

    def op_cq_destroy(self, _request: int, message: Message) -> dict[str, Any]:
        handle = int_field(message, "cq", 0, U32)
        cq = self.cqs.get(handle)
        if cq is None:
            raise NotFound(f"no CQ {handle}", "cq")
        if cq.users:
            raise Busy(f"{cq.users} QPs complete into it", "cq")
        del self.cqs[handle]
        if cq.channel is not None:
            cq.channel.users -= 1
        return {}

    def op_cq_notify(self, _request: int, message: Message) -> None:
        handle = int_field(message, "cq", 0, U32)
        cq = self.cqs.get(handle)
        if cq is None:
            raise NotFound(f"no CQ {handle}", "cq")
        if cq.channel is None:
            raise InvalidArgument("the CQ has no completion channel", "cq")
        seen = int_field(message, "seen", 0, U64)
        if seen < cq.seq:  # completions came after what the client saw: wake it now
            self._notify(cq)
        else:
            cq.armed = True

    def _notify(self, cq: CqRecord) -> None:
        cq.armed = False
        if cq.channel is not None:
            self._write(cq.channel.sock, {"cq": cq.handle, "s": cq.seq})

    def _complete(self, cq: CqRecord, entry: Message) -> None:
        cq.seq += 1
        self.push({"p": "wc", "cq": cq.handle, "s": cq.seq, **entry})
        if cq.armed:
            self._notify(cq)

    def push_ev_event(self, profile_id: int, ev: Ev, state: CtlEvState) -> None:
        """An EV event to every EV event CQ of this client."""
        for cq in self.cqs.values():
            if not cq.events:
                continue
            if self.control.channel.pending_bytes > MAX_UNREAD_BYTES // 2:
                cq.dropped += 1
                continue
            cq.seq += 1
            self.push(
                {
                    "p": "ev",
                    "cq": cq.handle,
                    "s": cq.seq,
                    "e": [profile_id, ev.to_json(), int(state), cq.dropped],
                }
            )
            cq.dropped = 0
            if cq.armed:
                self._notify(cq)

    def op_pd_alloc(self, _request: int, _message: Message) -> dict[str, Any]:
        if len(self.pds) >= MAX_PDS:
            raise OutOfResources(f"at most {MAX_PDS} protection domains", "pd")
        pd = self.service.new_pd()
        self.pds.add(pd)
        return {"pd": pd}

    def _pd(self, message: Message) -> int:
        pd = int_field(message, "pd", 0, U64)
        if pd not in self.pds:
            raise NotFound(f"no protection domain {pd}", "pd")
        return pd

    def op_pd_dealloc(self, _request: int, message: Message) -> dict[str, Any]:
        pd = self._pd(message)
        if any(r.pd == pd for r in self.regions.values()) or any(
            q.pd == pd for q in self.qps.values()
        ):
            raise Busy("regions or QPs still use it", "pd")
        self.pds.discard(pd)
        return {}

    # --- memory ---------------------------------------------------------------------------

    def op_mr_reg(self, _request: int, message: Message) -> dict[str, Any]:
        pd = self._pd(message)
        length = int_field(message, "length", 1, 1 << 40)
        access = Access(int_field(message, "access", 0, U32))
        unsupported = access & (Access.REMOTE_READ | Access.REMOTE_ATOMIC)
        if unsupported:
            raise NotSupported("MRC has no READ or atomics: REMOTE_READ/ATOMIC", "access")
        if access & Access.REMOTE_WRITE and not access & Access.LOCAL_WRITE:
            raise InvalidArgument("REMOTE_WRITE needs LOCAL_WRITE (as verbs)", "access")
        if len(self.regions) >= MAX_REGIONS:
            raise OutOfResources(f"at most {MAX_REGIONS} regions", "mr")
        fds = message["_fds"]
        if len(fds) != 1:
            raise InvalidArgument("expected the region's memfd with the request", "fd")
        fd = fds.pop()
        try:
            mm = map_region(fd, length)
        finally:
            os.close(fd)
        view = memoryview(mm)
        lkey = self.service.random_key(lambda key: key in self.regions)
        region = RegionRecord(lkey, pd, self.service.random_va(), length, access, mm, view)
        if access & Access.REMOTE_WRITE:
            core = self.runtime.pool.default.register_memory(view, region.va, pd)
            region.rkey = core.rkey
        self.regions[lkey] = region
        return {"lkey": lkey, "rkey": region.rkey, "addr": region.va, "length": length}

    def op_mr_dereg(self, _request: int, message: Message) -> dict[str, Any]:
        lkey = int_field(message, "lkey", 0, U32)
        region = self.regions.pop(lkey, None)
        if region is None:
            raise NotFound(f"no region with L_Key {lkey:#x}", "lkey")
        self._unmap(region)
        return {}

    def _unmap(self, region: RegionRecord) -> None:
        if region.rkey:
            with contextlib.suppress(KeyError):
                self.runtime.pool.default.memory.deregister(region.rkey)
        region.view.release()
        try:
            region.mm.close()
        except BufferError:
            # A posted WRITE still reads from it: unmapped once its last view is gone.
            self._zombies.append(region.mm)
        self._zombies = [mm for mm in self._zombies if not unmapped(mm)]

    def local(
        self, pd: int, lkey: int, addr: int, length: int, where: str, write: bool = False
    ) -> RegionRecord:
        """The region ``lkey`` of ``pd`` holding ``[addr, addr + length)``."""
        region = self.regions.get(lkey)
        if region is None or region.pd != pd:
            raise InvalidArgument(
                f"no region with L_Key {lkey:#x} in this QP's protection domain", f"{where}.lkey"
            )
        if addr < region.va or addr + length > region.va + region.length:
            raise InvalidArgument(
                f"[{addr:#x}, +{length}) lies outside the region [{region.va:#x}, "
                f"+{region.length})",
                f"{where}.addr",
            )
        if write and not region.access & Access.LOCAL_WRITE:
            raise InvalidArgument("the region lacks LOCAL_WRITE", f"{where}.lkey")
        return region

    # --- teardown ---------------------------------------------------------------------------

    def release(self) -> None:
        """The client is gone: unmap its regions, close its sockets (the subclasses close its
        QPs and forget its probes first)."""
        for region in list(self.regions.values()):
            self._unmap(region)
        self.regions.clear()
        for channel in self.channels.values():
            channel.sock.close()
        self.channels.clear()
        self.cqs.clear()
        if self.async_sock is not None:
            self.async_sock.close()
            self.async_sock = None
        self.runtime.service()
