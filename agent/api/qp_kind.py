"""What a QP type brings to the host API's QP operations (``agent.api.qp_ops``), and the state
check every transition makes.

The state machine, work requests and completions are the same for an MRC QP
(``agent.api.mrc_qp``) and an RC QP, the agent's RoCEv2 baseline (``agent.api.rc_qp``). Which
profiles a QP takes, where its connection opens and with what, and what its core's events and
its connection's end mean beyond the messages, are each type's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from agent.api.errors import InvalidArgument
from agent.api.resources import QpRecord
from agent.api.types import QpState
from agent.core import Event

#: Where a QP's core events go once its connection is open: the QP operations, which turn
#: them into completions.
Deliver = Callable[[QpRecord, Event], None]


class QpKind(Protocol):
    """One QP type's part in a QP's life; the QP operations set the new state after each
    transition succeeds. Each transition checks everything it reads before it changes
    anything, so that a refused one leaves the QP as it was."""

    def max_send_wr(self) -> int:
        """The deepest send queue a QP of this type may ask for."""
        ...

    def to_init(self, qp: QpRecord, attrs: dict[str, Any]) -> None:
        """RESET or INIT -> INIT (the state checked): the QP takes its profiles, or refuses
        them and keeps those it had."""
        ...

    def to_rtr(
        self,
        qp: QpRecord,
        dest: int,
        rq_psn: int,
        peers: tuple[bytes, ...],
        path_mtu: int | None,
    ) -> None:
        """INIT -> RTR towards QP ``dest`` at ``peers`` (one address a plane), receiving
        from ``rq_psn`` on, with the ``path_mtu`` asked for if any."""
        ...

    def to_rts(self, qp: QpRecord, attrs: dict[str, Any]) -> None:
        """RTR -> RTS, or RTS again with the attributes that may change there (the state
        checked)."""
        ...

    def other_event(self, qp: QpRecord, event: Event) -> None:
        """A core event of the QP's beyond its messages' and its connection's failure."""
        ...

    def failed(self, qp: QpRecord, reason: str) -> None:
        """The connection failed; its queued WRs are flushed after this."""
        ...

    def closed(self, qp: QpRecord) -> None:
        """The connection closed (failed, reset or destroyed)."""
        ...

    def released(self, qp: QpRecord) -> None:
        """The QP went back to RESET or is destroyed: it lets go of its profiles."""
        ...


def expect_state(qp: QpRecord, target: QpState, *allowed: QpState) -> None:
    """Refuse the move to ``target`` unless the QP is in one of the ``allowed`` states."""
    if qp.state not in allowed:
        before = " or ".join(s.name for s in allowed)
        raise InvalidArgument(
            f"{target.name} follows {before}, and the QP is {qp.state.name}", "qp_state"
        )
