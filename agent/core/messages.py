"""Messages on the sending side: posting them, cutting them into packets, confirming them.

* A message is an RDMA write of ``length`` bytes at ``remote_va``; it is cut into packets of
  ``payload_size`` on demand (so the window, not the message size, decides what is built).
  Each packet gets the next PSN and the next EV of the rotation; every copy is timestamped.
* A message is only *done* when the receiver's ACK (AETH) for it arrives: that ACK says every
  byte was placed. If SACKs covered every packet but the ACK does not come within an RTO, the
  message's last packet is sent again; the receiver answers a duplicate of a finished message
  by repeating its ACK (or NAK).

Which packets are in flight and which are lost is ``agent.core.recovery``'s business; the
``Sender`` (``agent.core.sender``) numbers packets and coordinates both.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Final

from agent.core.config import MrcConfig
from agent.core.ev import EvEntry, EvSet
from agent.core.events import Event, MessageAcked, MessageFailed
from agent.core.packets import DataPacket, ReliabilityProbe
from agent.core.psn import MSN_MASK, PSN_MASK
from agent.core.rtt import RttEstimator
from agent.core.stats import ConnectionCounters, RetransmitCause
from wire.constants import IMM_OPCODES, AethSyndrome, Opcode

_IMM_OPCODE_SET: Final = frozenset(int(op) for op in IMM_OPCODES)
_MAX_MESSAGE: Final = 0xFFFFFFFF  # RETH dma_length is 32 bits
_MAX_VA: Final = (1 << 64) - 1
_US: Final = 1_000_000
_WRITE_MIDDLE: Final = int(Opcode.WRITE_MIDDLE)
#: A module constant, not an enum attribute read per packet record (enum access is slow).
_TIMEOUT: Final = RetransmitCause.TIMEOUT


class SendQueueFull(Exception):
    """The connection already holds ``max_unconfirmed_messages`` unconfirmed messages."""


class OutboundMessage:
    """A posted RDMA write and its progress."""

    __slots__ = (
        "confirm_attempts",
        "data",
        "done",
        "immediate",
        "last_psn",
        "length",
        "msn",
        "next_offset",
        "remote_va",
        "rkey",
        "segmented",
        "unacked",
    )

    def __init__(
        self, msn: int, data: bytes | memoryview, remote_va: int, rkey: int, immediate: int | None
    ) -> None:
        self.msn = msn
        self.data = memoryview(data)
        self.length = len(data)
        self.remote_va = remote_va
        self.rkey = rkey
        self.immediate = immediate
        self.next_offset = 0
        self.last_psn = 0
        self.segmented = False
        self.unacked = 0
        self.done = False
        self.confirm_attempts = 0


class SentPacket:
    """One data packet (all its copies): where its bytes come from and its latest transmission."""

    __slots__ = (
        "acked",
        "earlier_copies",
        "entry",
        "in_flight",
        "length",
        "lost_cause",
        "message",
        "offset",
        "opcode",
        "order",
        "psn",
        "sent_time",
        "transmissions",
        "ts16",
    )

    def __init__(
        self,
        psn: int,
        message: OutboundMessage,
        offset: int,
        length: int,
        opcode: int,
        entry: EvEntry | None = None,
        sent_time: float = 0.0,
        ts16: int = 0,
        order: int = 0,
    ) -> None:
        # A record made with an ``entry`` is one being sent for the first time (the data
        # path fills in its first transmission here rather than field by field afterwards).
        self.psn = psn
        self.message = message
        self.offset = offset
        self.length = length
        self.opcode = opcode
        self.entry = entry
        self.sent_time = sent_time
        self.ts16 = ts16
        self.order = order
        self.transmissions = 0 if entry is None else 1
        #: (ts16, sent_time) of each copy before the latest, None until a retransmission.
        self.earlier_copies: list[tuple[int, float]] | None = None
        self.in_flight = entry is not None
        self.acked = False
        self.lost_cause = _TIMEOUT


def packet_opcode(first: bool, last: bool, immediate: bool) -> int:
    """The RDMA write opcode of a message's packet: first, middle, last or only."""
    if first and last:
        return Opcode.WRITE_ONLY_IMM if immediate else Opcode.WRITE_ONLY
    if first:
        return Opcode.WRITE_FIRST
    if last:
        return Opcode.WRITE_LAST_IMM if immediate else Opcode.WRITE_LAST
    return Opcode.WRITE_MIDDLE


class MessageQueue:
    """The posted messages of one connection until the receiver confirms each.

    ``pending`` holds the messages not yet cut whole, oldest first; ``unconfirmed`` every
    message without its ACK, by MSN, in posting order (the oldest is the RQMSN).
    """

    def __init__(
        self,
        config: MrcConfig,
        qp: int,
        remote_qp: int,
        ev_set: EvSet,
        rtt: RttEstimator,
        counters: ConnectionCounters,
        events: deque[Event],
    ) -> None:
        self._config = config
        self._qp = qp
        self._remote_qp = remote_qp
        self._ev_set = ev_set
        self._rtt = rtt
        self._counters = counters
        self._events = events
        self._mss = config.payload_size
        self._next_msn = 0
        self.pending: deque[OutboundMessage] = deque()
        self.unconfirmed: dict[int, OutboundMessage] = {}
        #: (deadline, sequence, MSN, attempt): when each fully acknowledged message's ACK is
        #: overdue; an entry whose attempt is no longer the message's is stale.
        self._confirm_heap: list[tuple[float, int, int, int]] = []
        self._confirm_seq = 0

    # --- posting --------------------------------------------------------------------------

    def can_post(self) -> bool:
        """Whether another message fits: its MSN stays fewer than ``max_unconfirmed_messages``
        past the RQMSN (the oldest unconfirmed MSN), whatever completed in between.

        The span, not the count, is what the receiver's ``completion_history`` must cover:
        otherwise a message whose ACK went missing falls out of that history while later ones
        complete, and its requests for the ACK are never answered.
        """
        span = (self._next_msn - self.rqmsn) & MSN_MASK
        return span < self._config.max_unconfirmed_messages

    def post(
        self, data: bytes | memoryview, remote_va: int, rkey: int, immediate: int | None
    ) -> int:
        """Queue an RDMA write of ``data`` to ``remote_va`` in the peer's region ``rkey``.

        ``bytes`` (or a copy of any other buffer) are kept as they are; a ``memoryview`` is
        read in place each time a packet of it is sent, as a NIC reads host memory, so the
        caller must leave those bytes alone until the message is acknowledged (the host API
        posts straight from an application's shared-memory region this way). Returns the
        message's MSN. Raises ``ValueError`` for arguments that cannot go on the
        wire and ``SendQueueFull`` when too many messages are unconfirmed.
        """
        if len(data) > _MAX_MESSAGE:
            raise ValueError(f"a message is at most {_MAX_MESSAGE} bytes, got {len(data)}")
        if not 0 <= remote_va <= _MAX_VA - len(data):
            raise ValueError(f"remote address {remote_va:#x} + {len(data)} exceeds 64 bits")
        if not 0 <= rkey <= 0xFFFFFFFF:
            raise ValueError(f"R_Key {rkey} is not a 32-bit value")
        if immediate is not None and not 0 <= immediate <= 0xFFFFFFFF:
            raise ValueError(f"immediate {immediate} is not a 32-bit value")
        if not self.can_post():
            raise SendQueueFull(
                f"the oldest unconfirmed message (MSN {self.rqmsn}) is "
                f"max_unconfirmed_messages={self._config.max_unconfirmed_messages} messages "
                f"back ({len(self.unconfirmed)} unconfirmed)"
            )
        msn = self._next_msn
        self._next_msn = (msn + 1) & MSN_MASK
        kept = data if isinstance(data, memoryview) else bytes(data)
        message = OutboundMessage(msn, kept, remote_va, rkey, immediate)
        self.pending.append(message)
        self.unconfirmed[msn] = message
        self._counters.messages_posted += 1
        return msn

    @property
    def rqmsn(self) -> int:
        """Oldest unconfirmed MSN (the receiver may forget outcomes of older messages)."""
        for msn in self.unconfirmed:
            return msn
        return self._next_msn

    # --- segmentation ---------------------------------------------------------------------

    def cut(
        self, now: float, limit: int, window: int, bytes_in_flight: int, psn: int, order: int
    ) -> list[SentPacket]:
        """Up to ``limit`` new packets cut from the pending messages, numbered from ``psn``
        and ``order`` on, each on the EV the rotation gives, while they fit ``window`` on top
        of ``bytes_in_flight`` (one always goes when nothing is in flight); fewer when the EVs
        run out. The records are new first transmissions; the caller accounts them as sent.

        One loop over local state: it runs for nearly every packet the sender sends.
        """
        out: list[SentPacket] = []
        pending = self.pending
        ev_set = self._ev_set
        mss = self._mss
        ts16 = int(now * _US) & 0xFFFF
        count = 0
        while pending and count < limit:
            message = pending[0]
            offset = message.next_offset
            length = message.length - offset
            if length > mss:
                length = mss
            if bytes_in_flight and bytes_in_flight + length > window:
                break
            entry = ev_set.next_for_data()
            if entry is None:
                break
            end = offset + length
            last = end >= message.length
            if offset and not last:
                opcode = _WRITE_MIDDLE  # most packets of a message
            else:
                opcode = packet_opcode(offset == 0, last, message.immediate is not None)
            order += 1
            rec = SentPacket(psn, message, offset, length, opcode, entry, now, ts16, order)
            message.unacked += 1
            message.next_offset = end
            if last:
                message.segmented = True
                message.last_psn = psn
                pending.popleft()
            psn = (psn + 1) & PSN_MASK
            bytes_in_flight += length
            out.append(rec)
            count += 1
        return out

    def data_packet(self, rec: SentPacket, retransmit: bool) -> DataPacket:
        """``rec``'s latest copy as a ``DataPacket`` (the object form; the data path encodes
        from the record instead, see ``agent.core.data_encoder``)."""
        message = rec.message
        opcode = rec.opcode
        immediate = message.immediate if opcode in _IMM_OPCODE_SET else None
        offset = rec.offset
        end = offset + rec.length
        # Positional: keyword calls cost more.
        return DataPacket(
            opcode,
            self._remote_qp,
            rec.psn,
            message.msn,
            self.rqmsn,
            message.remote_va + offset,
            message.rkey,
            message.length,
            bytes(message.data[offset:end]),
            immediate,
            rec.ts16,
            0,
            end >= message.length,
            retransmit,
        )

    # --- completion -----------------------------------------------------------------------

    def schedule_confirmation(self, message: OutboundMessage, now: float) -> None:
        """Every packet of ``message`` is acknowledged: its ACK is due within an RTO."""
        deadline = now + self._rtt.rto(message.confirm_attempts)
        self._confirm_seq += 1
        heapq.heappush(
            self._confirm_heap,
            (deadline, self._confirm_seq, message.msn, message.confirm_attempts),
        )

    def next_timer(self) -> float | None:
        """When the earliest ACK becomes overdue, or None."""
        return self._confirm_heap[0][0] if self._confirm_heap else None

    def on_timer(
        self, now: float, outbox: list[tuple[DataPacket | ReliabilityProbe, EvEntry]]
    ) -> None:
        """Ask again for every ACK overdue at ``now`` (the re-sends go to ``outbox``)."""
        heap = self._confirm_heap
        while heap and heap[0][0] <= now:
            _deadline, _seq, msn, attempt = heapq.heappop(heap)
            message = self.unconfirmed.get(msn)
            if message is None or message.confirm_attempts != attempt or message.unacked:
                continue
            self._resend_completion(message, now, outbox)

    def _resend_completion(
        self,
        message: OutboundMessage,
        now: float,
        outbox: list[tuple[DataPacket | ReliabilityProbe, EvEntry]],
    ) -> None:
        """The receiver's ACK is overdue: resend the message's last packet to ask again.

        A request that cannot go out (no EV may carry data, as for a lone EV after a loss) is
        not an attempt: it is made again after the same timeout, not a backed-off one.
        """
        entry = self._ev_set.next_for_control()
        if entry is None:
            self.schedule_confirmation(message, now)
            return
        message.confirm_attempts += 1
        length = message.length
        offset = ((length - 1) // self._mss) * self._mss if length else 0
        rec = SentPacket(
            message.last_psn,
            message,
            offset,
            length - offset,
            packet_opcode(offset == 0, True, message.immediate is not None),
        )
        rec.ts16 = int(now * _US) & 0xFFFF
        self._counters.completion_probes += 1
        outbox.append((self.data_packet(rec, retransmit=True), entry))
        self.schedule_confirmation(message, now)

    def finish(self, message: OutboundMessage, syndrome: int) -> None:
        """The receiver reported on ``message`` (ACK or NAK): it is done either way."""
        message.done = True
        self.unconfirmed.pop(message.msn, None)
        if syndrome == AethSyndrome.ACK:
            self._counters.messages_acked += 1
            self._events.append(MessageAcked(self._qp, message.msn, message.length))
        else:
            self._counters.messages_failed += 1
            try:
                name = AethSyndrome(syndrome).name
            except ValueError:
                name = f"syndrome {syndrome:#04x}"
            self._events.append(
                MessageFailed(self._qp, message.msn, f"receiver refused the write ({name})")
            )

    def fail_all(self, reason: str) -> None:
        """Every unconfirmed message fails with ``reason``; nothing is left to send."""
        for message in list(self.unconfirmed.values()):
            message.done = True
            self._counters.messages_failed += 1
            self._events.append(MessageFailed(self._qp, message.msn, reason))
        self.unconfirmed.clear()
        self.pending.clear()
        self._confirm_heap.clear()
