"""Which attributes ``mrc_modify_qp`` takes on the way to each state, and those every QP type
reads alike.

OCP's ``mrc.h`` lists what each transition takes (INIT: the profiles and a hint; RTR: the
responder's ``max_wimm_dest``, ``mpr_dest`` and ``cap``'s dynamic MPR; RTS: the requester's
``max_wimm`` and ``mpr``, ``timeout`` and retries); its QP example also gives the requester's
``mpr`` and ``max_wimm`` at RTR, so RTR takes them too. Verbs' attributes go where verbs takes
them (the peer, ``rq_psn`` and ``path_mtu`` at RTR; ``sq_psn`` at RTS). ``cap`` is what the
two sides agree on before traffic, so INIT and RTR take it and RTS does not. An attribute
given where it does not belong is refused by name, as verbs refuses a mask bit a transition
does not take; ERR and RESET take none.
"""

from __future__ import annotations

from typing import Any, Final

from agent.api.errors import InvalidArgument
from agent.api.qp_timing import MTU_256, MTU_4096
from agent.api.requests import U32, int_field
from agent.api.resources import MAX_WIMM
from agent.api.types import QpState

#: What each target state takes (the wire's names: ``dgid`` or ``dgids``, ``retry_linear`` and
#: ``retry_exp`` for OCP's ``retry.linear_cnt`` and ``retry.exp_cnt``).
TAKEN_AT: Final[dict[QpState, frozenset[str]]] = {
    QpState.INIT: frozenset({"ev_profile_id", "cc_profile_id", "qp_hint", "cap"}),
    QpState.RTR: frozenset(
        {
            "dest_qp_num",
            "rq_psn",
            "dgid",
            "dgids",
            "path_mtu",
            "max_wimm_dest",
            "mpr_dest",
            "cap",
            "max_wimm",
            "mpr",
        }
    ),
    QpState.RTS: frozenset({"sq_psn", "max_wimm", "mpr", "timeout", "retry_linear", "retry_exp"}),
}
KNOWN: Final = frozenset().union(*TAKEN_AT.values())


def given(target: QpState, attrs: dict[str, Any]) -> dict[str, Any]:
    """The attributes set (a null one is not: OCP's mask bit clear), once every name is
    known and taken on the way to ``target``."""
    for name in attrs:
        if name not in KNOWN:
            raise InvalidArgument(f"unknown attribute {name!r}", name)
    out = {name: value for name, value in attrs.items() if value is not None}
    taken = TAKEN_AT.get(target, frozenset())
    for name in out:
        if name not in taken:
            where = [state.name for state, names in TAKEN_AT.items() if name in names]
            raise InvalidArgument(
                f"the move to {target.name} does not take it (set at {' or '.join(where)})",
                name,
            )
    return out


def shared(attrs: dict[str, Any], max_mpr: int) -> dict[str, int]:
    """The attributes that mean the same for every QP type, checked (``mpr`` and
    ``mpr_dest`` within the device's ``max_mpr``), for the QP to keep once its transition
    succeeds."""
    bounds = {
        "cap": (0, U32),
        "max_wimm": (0, MAX_WIMM),
        "max_wimm_dest": (0, MAX_WIMM),
        "mpr": (0, max_mpr),
        "mpr_dest": (0, max_mpr),
        "path_mtu": (MTU_256, MTU_4096),
    }
    return {
        key: int_field(attrs, key, low, high) for key, (low, high) in bounds.items() if key in attrs
    }
