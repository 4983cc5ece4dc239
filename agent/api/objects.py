"""A host-API client's objects in the agent: completion channels, CQs (EV event CQs among
them), protection domains, registered regions, and the table of its QPs (``agent.api.qp_ops``
drives them), with the operations that make and free all but the QPs.

A region is the client's sealed memfd mapped here too (``agent.api.resources.map_region``);
one with REMOTE_WRITE is registered with the core, which then places arriving WRITEs
straight into it.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from typing import Any

from agent.api.errors import Busy, InvalidArgument, NotFound, NotSupported, OutOfResources
from agent.api.ids import IdSource
from agent.api.outbox import Outbox
from agent.api.requests import U32, U64, int_field
from agent.api.resources import (
    MAX_CHANNELS,
    MAX_CQE,
    MAX_CQS,
    MAX_PDS,
    MAX_REGIONS,
    MAX_UNREAD_BYTES,
    ChannelRecord,
    CqRecord,
    QpRecord,
    RegionRecord,
    adopt_socket,
    map_region,
    unmapped,
)
from agent.api.types import Access, CtlEvState, Ev
from agent.core import Endpoint
from agent.io.json_lines import Message


class ClientObjects:
    """One client's channels, CQs, PDs, regions and QPs."""

    def __init__(self, outbox: Outbox, ids: IdSource, memory: Endpoint) -> None:
        """``memory``: the endpoint whose memory table registers regions for remote WRITEs
        (every endpoint of the agent shares it)."""
        self._outbox = outbox
        self._ids = ids
        self._memory = memory
        self.channels: dict[int, ChannelRecord] = {}
        self.cqs: dict[int, CqRecord] = {}
        self.pds: set[int] = set()
        self.regions: dict[int, RegionRecord] = {}
        self.qps: dict[int, QpRecord] = {}
        self._zombies: list[mmap.mmap] = []
        self._next_handle = 1

    def _new_handle(self) -> int:
        handle = self._next_handle
        self._next_handle += 1
        return handle

    # --- channels, CQs, PDs -------------------------------------------------------------------

    def create_channel(self, message: Message) -> dict[str, Any]:
        if len(self.channels) >= MAX_CHANNELS:
            raise OutOfResources(f"at most {MAX_CHANNELS} completion channels", "channel")
        sock = adopt_socket(message["_fds"], "fd")
        handle = self._new_handle()
        self.channels[handle] = ChannelRecord(handle, sock)
        return {"channel": handle}

    def channel(self, message: Message, key: str = "channel") -> ChannelRecord:
        """The channel the request's ``key`` names."""
        handle = int_field(message, key, 0, U32)
        channel = self.channels.get(handle)
        if channel is None:
            raise NotFound(f"no completion channel {handle}", key)
        return channel

    def destroy_channel(self, message: Message) -> dict[str, Any]:
        channel = self.channel(message)
        if channel.users:
            raise Busy(f"{channel.users} CQs use it", "channel")
        del self.channels[channel.handle]
        channel.sock.close()
        return {}

    def create_cq(self, message: Message) -> dict[str, Any]:
        """A CQ for completions (``mrc_create_cq``). EV events are the controller's: an
        application asking for them here is refused, lest it read what only the privileged
        controller may (``create_ev_cq``)."""
        if message.get("ev_events"):
            raise InvalidArgument(
                "EV event CQs are the controller's (api.ctl.ev_cq.create)", "ev_events"
            )
        return self._create_cq(message, events=False)

    def create_ev_cq(self, message: Message) -> dict[str, Any]:
        """A CQ that EV events go to (``mrc_ctl_create_ev_cq``)."""
        return self._create_cq(message, events=True)

    def _create_cq(self, message: Message, events: bool) -> dict[str, Any]:
        if len(self.cqs) >= MAX_CQS:
            raise OutOfResources(f"at most {MAX_CQS} CQs", "cq")
        cqe = int_field(message, "cqe", 1, MAX_CQE)
        channel = self.channel(message) if message.get("channel") is not None else None
        handle = self._new_handle()
        self.cqs[handle] = CqRecord(handle, cqe, channel, events)
        if channel is not None:
            channel.users += 1
        return {"cq": handle, "cqe": cqe}

    def cq(self, message: Message, key: str = "cq", events: bool = False) -> CqRecord:
        """The CQ (``events``: the EV event CQ) the request's ``key`` names."""
        handle = int_field(message, key, 0, U32)
        cq = self.cqs.get(handle)
        if cq is None or cq.events != events:
            raise NotFound(f"no {'EV event ' if events else ''}CQ {handle}", key)
        return cq

    def destroy_cq(self, message: Message) -> dict[str, Any]:
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

    def notify_cq(self, message: Message) -> None:
        handle = int_field(message, "cq", 0, U32)
        cq = self.cqs.get(handle)
        if cq is None:
            raise NotFound(f"no CQ {handle}", "cq")
        if cq.channel is None:
            raise InvalidArgument("the CQ has no completion channel", "cq")
        seen = int_field(message, "seen", 0, U64)
        if seen < cq.seq:  # completions came after what the client saw: wake it now
            self._outbox.notify(cq)
        else:
            cq.armed = True

    def ev_event(self, profile_id: int, ev: Ev, state: CtlEvState) -> None:
        """An EV event to every EV event CQ of this client."""
        for cq in self.cqs.values():
            if not cq.events:
                continue
            if self._outbox.unread_bytes > MAX_UNREAD_BYTES // 2:
                cq.dropped += 1
                continue
            cq.seq += 1
            self._outbox.push(
                {
                    "p": "ev",
                    "cq": cq.handle,
                    "s": cq.seq,
                    "e": [profile_id, ev.to_json(), int(state), cq.dropped],
                }
            )
            cq.dropped = 0
            if cq.armed:
                self._outbox.notify(cq)

    def alloc_pd(self) -> dict[str, Any]:
        if len(self.pds) >= MAX_PDS:
            raise OutOfResources(f"at most {MAX_PDS} protection domains", "pd")
        pd = self._ids.new_pd()
        self.pds.add(pd)
        return {"pd": pd}

    def pd(self, message: Message) -> int:
        """The protection domain the request's ``pd`` names."""
        pd = int_field(message, "pd", 0, U64)
        if pd not in self.pds:
            raise NotFound(f"no protection domain {pd}", "pd")
        return pd

    def dealloc_pd(self, message: Message) -> dict[str, Any]:
        pd = self.pd(message)
        if any(r.pd == pd for r in self.regions.values()) or any(
            q.pd == pd for q in self.qps.values()
        ):
            raise Busy("regions or QPs still use it", "pd")
        self.pds.discard(pd)
        return {}

    # --- memory ---------------------------------------------------------------------------

    def reg_mr(self, message: Message) -> dict[str, Any]:
        pd = self.pd(message)
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
        lkey = self._ids.random_key(lambda key: key in self.regions)
        region = RegionRecord(lkey, pd, self._ids.random_va(), length, access, mm, view)
        if access & Access.REMOTE_WRITE:
            core = self._memory.register_memory(view, region.va, pd)
            region.rkey = core.rkey
        self.regions[lkey] = region
        return {"lkey": lkey, "rkey": region.rkey, "addr": region.va, "length": length}

    def dereg_mr(self, message: Message) -> dict[str, Any]:
        lkey = int_field(message, "lkey", 0, U32)
        region = self.regions.pop(lkey, None)
        if region is None:
            raise NotFound(f"no region with L_Key {lkey:#x}", "lkey")
        self._unmap(region)
        return {}

    def _unmap(self, region: RegionRecord) -> None:
        if region.rkey:
            with contextlib.suppress(KeyError):
                self._memory.memory.deregister(region.rkey)
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

    def release(self) -> None:
        """The client is gone: its regions are unmapped, its channels closed (its QPs are
        closed first, by ``agent.api.qp_ops``)."""
        for region in list(self.regions.values()):
            self._unmap(region)
        self.regions.clear()
        for channel in self.channels.values():
            channel.sock.close()
        self.channels.clear()
        self.cqs.clear()
