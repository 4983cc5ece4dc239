"""Connectionless EV probes (``mrc_ctl_ep_batch``): a batch of probes goes out on the agent's
default endpoint, and its request is answered once every probe is answered, or refused with
ETIMEDOUT, as OCP's call returns, once the batch's timeout passed with a probe unanswered (the
error carries the answers that came and the probes that got none). The probes of all clients
share one 16-bit sequence space.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.api.errors import OutOfResources, TimedOut
from agent.api.outbox import Outbox
from agent.api.requests import U16
from agent.api.resources import NS_PER_S
from agent.core import Event
from agent.core.endpoint import CONNECTIONLESS_QP
from agent.core.events import EvProbeAnswered
from agent.io.reactor import Timer
from agent.io.runtime import AgentRuntime


@dataclass
class ProbeBatch:
    """One ``ep_batch`` request's probes: the client to answer, and what is still out."""

    outbox: Outbox
    request: int
    pending: dict[int, tuple[int, int]]  # seq -> (req_id, port)
    responses: list[dict[str, Any]] = field(default_factory=list)
    timer: Timer | None = None


class EvProbes:
    """The agent's EV probes in flight, by sequence number."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self._runtime = runtime
        self._probes: dict[int, ProbeBatch] = {}
        self._next_seq = 0
        runtime.on_events(CONNECTIONLESS_QP, self._on_connectionless)

    def start(
        self,
        outbox: Outbox,
        request: int,
        probes: list[tuple[int, int, bytes, int]],
        timeout_ns: int,
    ) -> None:
        """Send ``probes`` (req_id, plane, peer, wire EV) and answer ``request`` on ``outbox``
        once all are answered or ``timeout_ns`` passed."""
        endpoint = self._runtime.pool.default
        now = self._runtime.clock()
        batch = ProbeBatch(outbox, request, {})
        for req_id, plane, peer, ev in probes:
            seq = self._free_seq()
            endpoint.send_ev_probe(plane, peer, ev, seq, now)
            batch.pending[seq] = (req_id, plane + 1)
            self._probes[seq] = batch
        batch.timer = self._runtime.reactor.call_at(
            now + timeout_ns / NS_PER_S, lambda: self._finish(batch)
        )
        self._runtime.service()

    def _free_seq(self) -> int:
        for _ in range(U16 + 1):
            seq = self._next_seq
            self._next_seq = (seq + 1) & U16
            if seq not in self._probes:
                return seq
        raise OutOfResources("65536 EV probes are already waiting for their answer", "req")

    def _on_connectionless(self, event: Event) -> None:
        if not isinstance(event, EvProbeAnswered):
            return
        batch = self._probes.pop(event.seq, None)
        if batch is None:
            return
        req_id, port = batch.pending.pop(event.seq)
        batch.responses.append(
            {"req_id": req_id, "port": port, "rtt": round(event.rtt * NS_PER_S), "adj_svc_time": 0}
        )
        if not batch.pending:
            self._finish(batch)

    def _finish(self, batch: ProbeBatch) -> None:
        if batch.timer is not None:
            batch.timer.cancel()
        endpoint = self._runtime.pool.default
        timed_out = []
        for seq, (req_id, _port) in batch.pending.items():
            endpoint.cancel_ev_probe(seq)
            self._probes.pop(seq, None)
            timed_out.append(req_id)
        batch.pending.clear()
        result = {"responses": batch.responses, "timed_out": timed_out}
        if not timed_out:
            batch.outbox.reply(batch.request, result)
            return
        asked = len(batch.responses) + len(timed_out)
        error = TimedOut(
            f"{len(timed_out)} of {asked} EV probes unanswered in time", "rsp_timeout", result
        )
        batch.outbox.fail(batch.request, error)

    def forget(self, outbox: Outbox) -> None:
        """The client of ``outbox`` left: its probes' answers go nowhere."""
        endpoint = self._runtime.pool.default
        for seq, batch in list(self._probes.items()):
            if batch.outbox is outbox:
                endpoint.cancel_ev_probe(seq)
                del self._probes[seq]
                if batch.timer is not None:
                    batch.timer.cancel()
