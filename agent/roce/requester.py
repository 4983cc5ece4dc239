"""The requester half of an RC QP: RDMA writes out, ACKs and NAKs in, go-back-N on loss
(or selective repeat, for a NIC that does it).

What a RoCE NIC does, and no more (IBTA Vol. 1, 9.7):

* Each posted write (a work request, WQE) takes the next PSNs, one per ``pmtu`` bytes, and is
  sent in order as WRITE FIRST / MIDDLE... / LAST, or ONLY, the last packet with AckReq set.
  The WQE is the retransmission buffer: a packet is rebuilt from it when resent, as a NIC
  reads it again from host memory.
* An ACK for PSN p acknowledges every packet up to p; a WQE completes once its last packet
  is acknowledged (``MessageAcked``).
* A NAK (PSN sequence error) for PSN p acknowledges everything before p and sends the
  requester *back* to p: every packet from p on is sent again, received or not (go-back-N).
  A NAK for the PSN a retransmission already restarted from is not acted on twice.
* The local ACK timer runs while packets are unacknowledged and restarts whenever an ACK
  acknowledges something new; when it expires the requester goes back to the oldest
  unacknowledged packet.
* Each timeout and each NAK-triggered go-back counts one retry; an ACK or NAK that
  acknowledges something new resets the count. More than ``retry_cnt`` retries in a row, and
  the QP enters the error state: every outstanding WQE fails (``ConnectionFailed``, then
  ``MessageFailed`` for each), as a NIC completes them with ``IBV_WC_RETRY_EXC_ERR``.
* A NAK for a remote access or invalid request error also puts the QP in the error state.

Under selective repeat (``RoceConfig.selective_repeat``, a modern NIC's; no IBTA text) the
responder keeps what arrives early and names each gap in a selective NAK
(``agent.roce.packets.SELECTIVE_NAK``); the requester resends just the PSNs a selective NAK
names, before new data and outside the outstanding cap (they are outstanding already). A
selective NAK is routine recovery, not a retry: only timeouts count against ``retry_cnt``, and
only an ACK acknowledging something new is progress. A timeout resends the oldest
unacknowledged packet alone; until what was sent before the timeout is acknowledged, each ACK
that advances but stops short of it names the next hole, resent at once (NewReno's partial
ACK, RFC 6582), so a lost resend or a lost NAK costs one timeout, not one per hole.

The timer (``agent.roce.rto``) is the verbs local ACK timeout, or adaptive: from RTT samples
(one packet timed at a time, Karn's rule) with backoff. Either way it restarts on progress.

Packets are paced at DCQCN's current rate (``agent.core.cc.dcqcn_law.ReactionPoint``), at most
``max_outstanding`` of them unacknowledged. PSNs are 24-bit on the wire; inside, every packet
has a plain, ever-growing sequence number (``seq``), and wire PSN = (first PSN + seq) mod 2**24.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Final

from agent.core.cc.dcqcn_law import ReactionPoint
from agent.core.connection import ConnectionClosed
from agent.core.drops import DropReason
from agent.core.events import ConnectionFailed, Event, MessageAcked, MessageFailed
from agent.core.messages import SendQueueFull
from agent.core.psn import PSN_MASK, psn_diff
from agent.core.stats import RetransmitCause
from agent.roce.config import RoceConfig
from agent.roce.packets import SELECTIVE_NAK, RoceData
from agent.roce.rto import RetransmitTimer
from wire.constants import AethSyndrome, RoceOpcode

_U32: Final = 0xFFFFFFFF
_MAX_VA: Final = (1 << 64) - 1
_NAK_SEQ: Final = int(AethSyndrome.NAK_PSN_SEQUENCE_ERROR)
_SYNDROME_KIND: Final = 0x60  # bits 6-5 of the syndrome: 00 ACK, 01 RNR NAK, 11 NAK
_KIND_ACK: Final = 0x00
_KIND_NAK: Final = 0x60
_NAK_NAMES: Final = {
    int(AethSyndrome.NAK_INVALID_REQUEST): "invalid request",
    int(AethSyndrome.NAK_REMOTE_ACCESS_ERROR): "remote access error",
    int(AethSyndrome.NAK_REMOTE_OPERATIONAL_ERROR): "remote operational error",
    SELECTIVE_NAK: "selective NAK, and this QP does not run selective repeat",
}

_FIRST: Final = int(RoceOpcode.RC_RDMA_WRITE_FIRST)
_MIDDLE: Final = int(RoceOpcode.RC_RDMA_WRITE_MIDDLE)
_LAST: Final = int(RoceOpcode.RC_RDMA_WRITE_LAST)
_LAST_IMM: Final = int(RoceOpcode.RC_RDMA_WRITE_LAST_IMM)
_ONLY: Final = int(RoceOpcode.RC_RDMA_WRITE_ONLY)
_ONLY_IMM: Final = int(RoceOpcode.RC_RDMA_WRITE_ONLY_IMM)


class _Wqe:
    """One posted RDMA write and the PSNs (as ``seq`` numbers) its packets take."""

    __slots__ = ("data", "first", "immediate", "msn", "packets", "rkey", "va")

    def __init__(
        self, msn: int, data: bytes | memoryview, va: int, rkey: int, immediate: int | None,
        first: int, packets: int,
    ) -> None:  # fmt: skip
        self.msn = msn
        self.data = data
        self.va = va
        self.rkey = rkey
        self.immediate = immediate
        self.first = first
        self.packets = packets

    @property
    def last(self) -> int:
        """The ``seq`` of its last packet."""
        return self.first + self.packets - 1


class RequesterCounters:
    """What the requester did, for ``agent.roce.qp``'s statistics."""

    __slots__ = (
        "acks_received",
        "bytes_acked",
        "data_bytes_sent",
        "data_packets_sent",
        "duplicate_acks",
        "go_backs",
        "messages_acked",
        "messages_failed",
        "messages_posted",
        "naks_received",
        "packets_acked",
        "retransmits",
        "timeouts",
    )

    def __init__(self) -> None:
        self.messages_posted = 0
        self.messages_acked = 0
        self.messages_failed = 0
        self.data_packets_sent = 0
        self.data_bytes_sent = 0
        self.packets_acked = 0
        self.bytes_acked = 0
        self.acks_received = 0
        self.duplicate_acks = 0
        self.naks_received = 0
        self.timeouts = 0
        #: Times the requester went back: after a NAK or a timeout.
        self.go_backs = 0
        #: Packets sent again, by what sent the requester back.
        self.retransmits: dict[RetransmitCause, int] = {cause: 0 for cause in RetransmitCause}


class Requester:
    """The send side of one RC QP towards ``dest_qp``, starting at PSN ``first_psn``."""

    def __init__(
        self,
        qp: int,
        dest_qp: int,
        first_psn: int,
        config: RoceConfig,
        rate: ReactionPoint,
        emit: Callable[[Event], None],
    ) -> None:
        self.qp = qp
        self._dest_qp = dest_qp
        self._first_psn = first_psn & PSN_MASK
        self._config = config
        self._pmtu = config.pmtu
        self._selective = config.selective_repeat
        #: The local ACK timer's duration: fixed, or adaptive (``agent.roce.rto``).
        self.timer = RetransmitTimer(config)
        self._adaptive = self.timer.adaptive
        self.rate = rate
        self._emit = emit
        self.counters = RequesterCounters()
        self._wqes: deque[_Wqe] = deque()
        self._next_msn = 0
        #: seq after the last posted packet (the next WQE starts here).
        self._posted_end = 0
        #: Oldest unacknowledged seq; next seq to (re)send; one past the newest ever sent.
        self._una = 0
        self._cursor = 0
        self._sent_end = 0
        #: Index in ``_wqes`` of the WQE holding ``_cursor`` (valid while ``_cursor`` is posted).
        self._cursor_wqe = 0
        #: Where the latest go-back restarted and what it must resend up to (a NAK for the
        #: same PSN while that resend is under way is the same loss, not a new one).
        self._resend_from = -1
        self._resend_until = -1
        self._resend_cause = RetransmitCause.TIMEOUT
        #: Selective repeat: PSNs (as ``seq``) to resend before new data, and why; the set
        #: of them (a PSN is queued once).
        self._resends: deque[tuple[int, RetransmitCause]] = deque()
        self._queued: set[int] = set()
        #: Selective repeat after a timeout: what had been sent by then (-1: no recovery).
        self._recover_until = -1
        #: The packet timed for an RTT sample (-1: none) and when it left (adaptive timer).
        self._timed_seq = -1
        self._timed_at = 0.0
        #: Retries since the last ACK that acknowledged something new.
        self.retries = 0
        self._deadline: float | None = None
        self._next_send = float("-inf")
        #: Set once the QP is in the error state.
        self.error: str | None = None

    # --- work -----------------------------------------------------------------------------

    @property
    def outstanding_wqes(self) -> int:
        """Work requests posted and not completed."""
        return len(self._wqes)

    def can_post(self) -> bool:
        """Whether ``post_write`` would take another work request now."""
        return self.error is None and len(self._wqes) < self._config.send_queue_depth

    def post_write(
        self, data: bytes | memoryview, va: int, rkey: int, immediate: int | None
    ) -> int:
        """Queue an RDMA write; returns its MSN (the requester's count of posted writes).

        Raises ``ConnectionClosed`` in the error state, ``SendQueueFull`` when the send queue
        is full, ``ValueError`` for arguments no packet could carry."""
        if self.error is not None:
            raise ConnectionClosed(self.error)
        if len(self._wqes) >= self._config.send_queue_depth:
            raise SendQueueFull(f"{len(self._wqes)} work requests outstanding")
        if len(data) > _U32 or not 0 <= va <= _MAX_VA - len(data) or not 0 <= rkey <= _U32:
            raise ValueError("a write's length and R_Key are 32-bit, its address range 64-bit")
        if immediate is not None and not 0 <= immediate <= _U32:
            raise ValueError(f"immediate {immediate} does not fit in 32 bits")
        packets = max(1, -(-len(data) // self._pmtu))
        msn = self._next_msn
        self._next_msn += 1
        self._wqes.append(_Wqe(msn, data, va, rkey, immediate, self._posted_end, packets))
        self._posted_end += packets
        self.counters.messages_posted += 1
        return msn

    # --- sending --------------------------------------------------------------------------

    @property
    def wants_to_send(self) -> bool:
        """Whether a packet is waiting (for the pacer or the outstanding cap, or now)."""
        return self.error is None and (self._cursor < self._posted_end or bool(self._resends))

    @property
    def unacked_packets(self) -> int:
        """Packets sent and not yet acknowledged."""
        return self._sent_end - self._una

    @property
    def unacked_bytes(self) -> int:
        """Payload bytes of those packets (each a full PMTU but a message's last)."""
        return min(self.unacked_packets * self._pmtu, sum(len(w.data) for w in self._wqes))

    def pacing_wake(self) -> float | None:
        """When the pacer lets the next waiting packet go (None: nothing waits, or what waits
        waits for an acknowledgement). In the past when it may go at once."""
        if self.error is not None:
            return None
        if not self._resends and (
            self._cursor >= self._posted_end
            or self._cursor - self._una >= self._config.max_outstanding
        ):
            return None
        return self._next_send

    def next_packets(self, now: float, limit: int) -> list[RoceData]:
        """Packets that may leave at ``now``: at most ``limit``, as the pacer and the
        outstanding cap allow, oldest first (retransmissions before new data)."""
        out: list[RoceData] = []
        if self.error is not None:
            return out
        cap = self._config.max_outstanding
        rate = self.rate
        slack = self._config.pacing_slack
        counters = self.counters
        while len(out) < limit:
            if self._next_send > now:
                break
            if self._resends:
                seq, cause = self._resends.popleft()
                self._queued.discard(seq)
                if seq < self._una:
                    continue  # acknowledged since it was asked for
                packet = self._build(self._wqes[self._wqe_index(seq)], seq)
                counters.retransmits[cause] += 1
                if seq <= self._timed_seq:
                    self._timed_seq = -1  # Karn: its ACK may answer this copy
            else:
                seq = self._cursor
                if seq >= self._posted_end or seq - self._una >= cap:
                    break
                packet = self._packet(seq)
                if seq < self._sent_end:
                    counters.retransmits[self._resend_cause] += 1
                    if seq <= self._timed_seq:
                        self._timed_seq = -1  # Karn: its ACK may answer this copy
                else:
                    self._sent_end = seq + 1
                    if self._adaptive and self._timed_seq < 0:
                        self._timed_seq = seq
                        self._timed_at = now
                self._cursor = seq + 1
            out.append(packet)
            size = len(packet.payload)
            self._next_send = max(self._next_send, now - slack) + size / rate.rate
            rate.on_sent(now, size)
            counters.data_packets_sent += 1
            counters.data_bytes_sent += size
            if self._deadline is None:
                rto = self.timer.rto
                if rto is not None:
                    self._deadline = now + rto
        return out

    def _packet(self, seq: int) -> RoceData:
        """The packet with sequence number ``seq`` (which ``_cursor_wqe`` locates)."""
        wqes = self._wqes
        index = self._cursor_wqe
        wqe = wqes[index]
        while seq > wqe.last:
            index += 1
            wqe = wqes[index]
        self._cursor_wqe = index
        return self._build(wqe, seq)

    def _build(self, wqe: _Wqe, seq: int) -> RoceData:
        """Packet ``seq`` of ``wqe``, read from the WQE's data again."""
        k = seq - wqe.first
        offset = k * self._pmtu
        # read from the WQE at every (re)send, as a NIC reads host memory (a view: the region)
        payload = bytes(wqe.data[offset : offset + self._pmtu])
        last = k == wqe.packets - 1
        imm = wqe.immediate
        if wqe.packets == 1:
            opcode = _ONLY if imm is None else _ONLY_IMM
        elif k == 0:
            opcode = _FIRST
        elif last:
            opcode = _LAST if imm is None else _LAST_IMM
        else:
            opcode = _MIDDLE
        psn = (self._first_psn + seq) & PSN_MASK
        if k == 0:
            return RoceData(
                opcode, self._dest_qp, psn, payload, last, wqe.va, wqe.rkey, len(wqe.data),
                imm if last else None,
            )  # fmt: skip
        return RoceData(opcode, self._dest_qp, psn, payload, last, immediate=imm if last else None)

    def _go_back(self, seq: int, cause: RetransmitCause) -> None:
        """Resend everything from ``seq`` on."""
        self.counters.go_backs += 1
        self._resend_from = seq
        self._resend_until = self._sent_end
        self._resend_cause = cause
        self._cursor = seq
        self._cursor_wqe = self._wqe_index(seq)

    def _wqe_index(self, seq: int) -> int:
        for index, wqe in enumerate(self._wqes):
            if seq <= wqe.last:
                return index
        return len(self._wqes)

    # --- answers --------------------------------------------------------------------------

    def _seq_of(self, psn: int) -> int:
        """The ``seq`` a wire PSN stands for, taken as the one nearest the oldest unacked."""
        una_psn = (self._first_psn + self._una) & PSN_MASK
        return self._una + psn_diff(psn, una_psn)

    def on_ack(self, syndrome: int, psn: int, now: float) -> DropReason | None:
        """An ACKNOWLEDGE arrived; returns why it was dropped, if it was."""
        if self.error is not None:
            return DropReason.CONNECTION_CLOSED
        kind = syndrome & _SYNDROME_KIND
        seq = self._seq_of(psn)
        if kind == _KIND_ACK:
            if seq >= self._sent_end:
                return DropReason.UNEXPECTED  # acknowledges a packet never sent
            self.counters.acks_received += 1
            if seq < self._una:
                self.counters.duplicate_acks += 1
                return None
            self._acknowledge_through(seq, now)
            self.retries = 0
            return None
        if kind != _KIND_NAK:
            return DropReason.UNEXPECTED  # RNR NAK: writes take no receive buffers
        self.counters.naks_received += 1
        if syndrome != _NAK_SEQ:
            name = _NAK_NAMES.get(syndrome, f"NAK syndrome {syndrome:#04x}")
            self.fail(f"the responder answered with a NAK: {name}")
            return None
        if seq >= self._sent_end:
            return DropReason.UNEXPECTED  # names a packet never sent
        if seq < self._una:
            self.counters.duplicate_acks += 1
            return None  # stale: a later ACK or NAK already covered it
        if seq > self._una:  # the NAK acknowledges every PSN before it: progress
            self._acknowledge_through(seq - 1, now)
            self.retries = 0
        if seq == self._resend_from and self._cursor < self._resend_until:
            return None  # the resend this NAK asks for is already under way
        if self._retry(now, f"sequence-error NAK for PSN {psn}"):
            self._go_back(seq, RetransmitCause.NACK)
        return None

    def on_selective_nak(self, psn: int, count: int, now: float) -> DropReason | None:
        """A selective NAK arrived: ``count`` PSNs from ``psn`` on are missing at the
        responder; returns why it was dropped, if it was. Without selective repeat it is the
        unknown NAK it would be to a NIC, and the QP fails."""
        if not self._selective:
            return self.on_ack(SELECTIVE_NAK, psn, now)
        if self.error is not None:
            return DropReason.CONNECTION_CLOSED
        seq = self._seq_of(psn)
        end = seq + count
        if count < 1 or end > self._sent_end:
            return DropReason.UNEXPECTED  # names packets never sent
        self.counters.naks_received += 1
        for missing in range(max(seq, self._una), end):
            self._resend(missing, RetransmitCause.NACK, False)
        return None

    def _resend(self, seq: int, cause: RetransmitCause, first: bool) -> None:
        """Queue ``seq`` for resending (selective repeat), ahead of the rest if ``first``;
        a PSN already queued stays where it is."""
        if seq in self._queued:
            return
        self._queued.add(seq)
        if first:
            self._resends.appendleft((seq, cause))
        else:
            self._resends.append((seq, cause))

    def _acknowledge_through(self, seq: int, now: float) -> None:
        """Every packet up to ``seq`` arrived: complete the WQEs it finishes."""
        counters = self.counters
        counters.packets_acked += seq + 1 - self._una
        self._una = seq + 1
        wqes = self._wqes
        while wqes and wqes[0].last <= seq:
            wqe = wqes.popleft()
            self._cursor_wqe = max(0, self._cursor_wqe - 1)
            counters.messages_acked += 1
            counters.bytes_acked += len(wqe.data)
            self._emit(MessageAcked(self.qp, wqe.msn, len(wqe.data)))
        if self._cursor < self._una:
            self._cursor = self._una  # the originals arrived after all: skip their resend
            self._cursor_wqe = self._wqe_index(self._una)
        timer = self.timer
        if 0 <= self._timed_seq <= seq:
            timer.on_sample(now - self._timed_at)
            self._timed_seq = -1
        timer.on_progress()
        if self._recover_until >= 0:
            if self._una < self._recover_until:
                self._resend(self._una, RetransmitCause.TIMEOUT, True)  # a partial ACK
            else:
                self._recover_until = -1
        rto = timer.rto
        if rto is not None:
            self._deadline = now + rto if self._una < self._sent_end else None

    # --- time -----------------------------------------------------------------------------

    def next_timer(self) -> float | None:
        """When the local ACK timer expires (None: it is not running)."""
        return self._deadline if self.error is None else None

    def handle_timer(self, now: float) -> None:
        """Run the local ACK timer: on expiry go back to the oldest unacknowledged packet
        (selective repeat: resend it alone)."""
        deadline = self._deadline
        if deadline is None or now < deadline or self.error is not None:
            return
        if self._una >= self._sent_end:
            self._deadline = None
            return
        self.counters.timeouts += 1
        self.timer.on_timeout()
        if not self._retry(now, "local ACK timeout"):
            return
        if self._selective:
            self._recover_until = self._sent_end
            self._resend(self._una, RetransmitCause.TIMEOUT, True)
        else:
            self._go_back(self._una, RetransmitCause.TIMEOUT)

    def _retry(self, now: float, what: str) -> bool:
        """Count a retry (True), or enter the error state when they are used up (False)."""
        self.retries += 1
        timer = self.timer
        if self.retries > self._config.retry_cnt:
            timeout = timer.ceiling
            text = f"{timeout * 1e3:.1f} ms" if timeout is not None else "none"
            if timer.adaptive:
                text = f"adaptive, at most {text}"
            self.fail(
                f"transport retry counter exceeded (IBV_WC_RETRY_EXC_ERR): {what} after "
                f"retry_cnt={self._config.retry_cnt} retries without progress (local ACK "
                f"timeout {text}, timeout={self._config.timeout})"
            )
            return False
        rto = timer.rto
        if rto is not None:
            self._deadline = now + rto
        return True

    def fail(self, reason: str) -> None:
        """Enter the error state: the QP is dead, every outstanding WQE fails."""
        if self.error is None:
            self._emit(ConnectionFailed(self.qp, f"QP entered the error state: {reason}"))
            self.close(reason)

    def close(self, reason: str) -> None:
        """Stop (the QP is destroyed, or failed): every outstanding WQE fails with ``reason``."""
        if self.error is not None:
            return
        self.error = reason
        self._deadline = None
        self._resends.clear()
        self._queued.clear()
        while self._wqes:
            wqe = self._wqes.popleft()
            self.counters.messages_failed += 1
            self._emit(MessageFailed(self.qp, wqe.msn, reason))
        self._cursor = self._posted_end = self._una = self._sent_end
