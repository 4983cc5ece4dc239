"""Which attributes each QP transition takes (OCP's ``mrc_modify_qp`` table and its QP
example): an unknown attribute or one of another transition is refused by name, a refused
modify changes nothing, ``cap`` is taken at INIT and RTR, ``mpr`` and ``mpr_dest`` are bounded
by the device's ``max_mpr``. The rules alone, then through two in-process agents on the
deterministic link."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.api.errors import InvalidArgument
from agent.api.qp_transitions import given, shared
from agent.api.types import QpState
from tests.unit.agent.api.harness import Agents, Endpoint

#: OCP's ``MRC_QP_CAP_DYNAMIC_MPR``, which OCP's example sets on the way to RTR.
QP_CAP_DYNAMIC_MPR = 1 << 1


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Agents]:
    made = Agents(tmp_path)
    yield made
    made.close()


@pytest.fixture
def pair(agents: Agents) -> tuple[Endpoint, Endpoint]:
    return Endpoint(agents.context("a")), Endpoint(agents.context("b"))


def test_unset_attributes_are_dropped_and_the_rest_kept():
    attrs = {"dest_qp_num": 5, "rq_psn": 0, "dgid": "10.0.0.2", "path_mtu": None}
    assert given(QpState.RTR, attrs) == {"dest_qp_num": 5, "rq_psn": 0, "dgid": "10.0.0.2"}


def test_an_unknown_name_is_refused_even_unset():
    with pytest.raises(InvalidArgument, match="unknown") as raised:
        given(QpState.RTS, {"sq_psn": 1, "retry_cnt": None})
    assert raised.value.field == "retry_cnt"


def test_a_misplaced_attribute_is_refused_saying_where_it_is_set():
    with pytest.raises(InvalidArgument, match="set at RTR") as raised:
        given(QpState.RTS, {"sq_psn": 1, "path_mtu": 3})
    assert raised.value.field == "path_mtu"
    with pytest.raises(InvalidArgument, match="INIT or RTR") as raised:
        given(QpState.RTS, {"cap": 0})
    assert raised.value.field == "cap"


def test_shared_attributes_are_checked_against_their_bounds():
    assert shared({"mpr": 32, "max_wimm": 8, "timeout": 99}, max_mpr=32) == {
        "mpr": 32,
        "max_wimm": 8,
    }, "timeout is each QP type's own"
    with pytest.raises(InvalidArgument) as raised:
        shared({"mpr_dest": 33}, max_mpr=32)
    assert raised.value.field == "mpr_dest"


def _modify(me: Endpoint, state: QpState, **attrs: Any) -> dict[str, Any]:
    """``api.qp.modify`` as it comes over the socket, with whatever attribute names."""
    return me.ctx.link.request("api.qp.modify", qp=me.qp.qp_num, qp_state=state.name, attrs=attrs)


def _peer(peer: Endpoint) -> dict[str, Any]:
    info = peer.info()
    return {"dest_qp_num": info["qpn"], "rq_psn": info["psn"], "dgid": info["gid"]}


def test_an_unknown_attribute_is_refused_by_name_and_changes_nothing(pair):
    a, _ = pair
    with pytest.raises(InvalidArgument, match="unknown") as raised:
        _modify(a, QpState.INIT, ev_profile_id=0, ev_profil_id=3)
    assert raised.value.field == "ev_profil_id"
    assert a.qp.query()["qp_state"] == "RESET"


@pytest.mark.parametrize(
    ("state", "attr", "value"),
    [
        (QpState.INIT, "dest_qp_num", 5),  # RTR's
        (QpState.INIT, "sq_psn", 1),  # RTS's
        (QpState.RTR, "ev_profile_id", 0),  # INIT's
        (QpState.RTR, "sq_psn", 1),  # RTS's
        (QpState.RTR, "timeout", 14),  # RTS's
        (QpState.ERR, "timeout", 14),  # ERR and RESET take none
        (QpState.RESET, "ev_profile_id", 0),
    ],
    ids=lambda value: value.name if isinstance(value, QpState) else str(value),
)
def test_an_attribute_of_another_transition_is_refused_by_name(pair, state, attr, value):
    a, b = pair
    if state is QpState.RTR:
        a.qp.modify(QpState.INIT)
    attrs = _peer(b) if state is QpState.RTR else {}
    before = a.qp.query()
    with pytest.raises(InvalidArgument) as raised:
        _modify(a, state, **attrs, **{attr: value})
    assert raised.value.field == attr
    assert a.qp.query() == before


@pytest.mark.parametrize(
    ("attr", "value"),
    [("path_mtu", 1), ("max_wimm_dest", 4), ("mpr_dest", 8), ("dest_qp_num", 5), ("cap", 0)],
)
def test_an_rtr_attribute_at_rts_is_refused_and_the_qp_stays_in_rtr(pair, attr, value):
    a, b = pair
    a.qp.modify(QpState.INIT)
    a.qp.modify(QpState.RTR, **_peer(b))
    before = a.qp.query()
    with pytest.raises(InvalidArgument) as raised:
        _modify(a, QpState.RTS, sq_psn=1, **{attr: value})
    assert raised.value.field == attr
    assert a.qp.query() == before, "nothing set: not the send PSN either"


def test_a_refused_rts_sets_no_send_psn(pair):
    a, b = pair
    a.qp.modify(QpState.INIT)
    a.qp.modify(QpState.RTR, **_peer(b))
    with pytest.raises(InvalidArgument) as raised:
        a.qp.modify(QpState.RTS, sq_psn=1, timeout=25)
    assert raised.value.field == "timeout"
    attrs = a.qp.query()
    assert attrs["qp_state"] == "RTR" and "sq_psn" not in attrs


def test_ocps_example_attributes_are_taken_at_each_transition(pair):
    """``examples/mrc_qp.md``: profiles at INIT; MPRs, WIMM limits and ``cap`` at RTR; the
    requester's MPR and WIMM limit, timeout and retries at RTS."""
    a, b = pair
    a.qp.modify(QpState.INIT, ev_profile_id=0, cc_profile_id=0)
    a.qp.modify(
        QpState.RTR,
        **_peer(b),
        mpr=8,
        mpr_dest=8,
        max_wimm=128,
        max_wimm_dest=128,
        cap=QP_CAP_DYNAMIC_MPR,
    )
    a.qp.modify(QpState.RTS, sq_psn=1, mpr=8, max_wimm=128, timeout=8, retry=(7, 25))
    attrs = a.qp.query()
    assert attrs["qp_state"] == "RTS"
    assert (attrs["mpr"], attrs["mpr_dest"], attrs["cap"]) == (8, 8, QP_CAP_DYNAMIC_MPR)
    assert (attrs["max_wimm"], attrs["max_wimm_dest"]) == (128, 128)
    assert (attrs["timeout"], attrs["retry_linear"], attrs["retry_exp"]) == (8, 7, 25)


def test_cap_is_taken_at_rtr_over_the_socket(pair):
    a, b = pair
    _modify(a, QpState.INIT, cap=0)
    assert a.qp.query()["cap"] == 0
    _modify(a, QpState.RTR, **_peer(b), cap=QP_CAP_DYNAMIC_MPR)
    assert a.qp.query()["cap"] == QP_CAP_DYNAMIC_MPR


def test_cap_does_not_change_once_in_rts(pair):
    a, b = pair
    a.qp.modify(QpState.INIT)
    a.qp.modify(QpState.RTR, **_peer(b), cap=QP_CAP_DYNAMIC_MPR)
    a.qp.modify(QpState.RTS, sq_psn=1)
    with pytest.raises(InvalidArgument) as raised:
        a.qp.modify(QpState.RTS, cap=0)
    assert raised.value.field == "cap"
    assert a.qp.query()["cap"] == QP_CAP_DYNAMIC_MPR


def test_mpr_is_bounded_by_the_devices_max_mpr(pair):
    a, b = pair
    max_mpr = a.ctx.device.max_mpr
    assert max_mpr == 32  # a 4096-PSN window in 128-PSN units
    a.qp.modify(QpState.INIT)
    with pytest.raises(InvalidArgument) as raised:
        a.qp.modify(QpState.RTR, **_peer(b), mpr_dest=max_mpr + 1)
    assert raised.value.field == "mpr_dest"
    a.qp.modify(QpState.RTR, **_peer(b), mpr_dest=max_mpr)
    with pytest.raises(InvalidArgument) as raised:
        a.qp.modify(QpState.RTS, sq_psn=1, mpr=max_mpr + 1)
    assert raised.value.field == "mpr"
    a.qp.modify(QpState.RTS, sq_psn=1, mpr=max_mpr)
    assert (a.qp.query()["mpr"], a.qp.query()["mpr_dest"]) == (max_mpr, max_mpr)
