"""Striping a RoCE transfer over several QPs: QP i on plane i mod planes, all opened or none,
and the QPs' statistics read as one connection's."""

from __future__ import annotations

import dataclasses

import pytest

from agent.core import MrcConfig
from agent.io.endpoints import EndpointPool
from agent.io.qp_striping import connect_striped, merged_roce_stats, merged_stats, plane_of
from agent.roce import RoceConfig
from tests.unit.agent.io.memory_link import PLANE_A, PLANE_B

PLANE_A2, PLANE_B2 = bytes([10, 1, 0, 1]), bytes([10, 1, 0, 2])


def test_qps_go_round_robin_over_the_planes():
    assert [plane_of(i, 2) for i in range(5)] == [0, 1, 0, 1, 0]
    assert [plane_of(i, 1) for i in range(3)] == [0, 0, 0]


def _pool() -> EndpointPool:
    return EndpointPool([PLANE_A, PLANE_A2], MrcConfig(), seed=4)


def test_each_qp_opens_on_its_plane_towards_the_peer_on_the_same_plane_with_its_own_port():
    pool = _pool()
    local = [(pool.allocate_qp(pool.roce), 10 * i) for i in range(4)]
    remote = [(100 + i, 20 * i) for i in range(4)]
    connect_striped(pool, local, remote, (PLANE_B, PLANE_B2), RoceConfig())
    stats = [pool.roce.roce_stats(qp) for qp, _psn in local]
    assert len({s.src_port for s in stats}) == 4
    paths = [pool.roce.connection_stats(qp).evs[0].plane for qp, _psn in local]
    assert paths == [0, 1, 0, 1]
    assert set(pool.qps) == {qp for qp, _psn in local}


def test_a_qp_that_cannot_open_closes_the_ones_opened_before_it():
    pool = _pool()
    local = [(pool.allocate_qp(pool.roce), 0) for _ in range(3)]
    remote = [(100, 0), (101, 0), (0x1000000, 0)]  # the last is no QP number
    with pytest.raises(ValueError):
        connect_striped(pool, local, remote, (PLANE_B, PLANE_B2), RoceConfig())
    assert pool.qps == ()


def test_as_many_qps_must_answer_as_were_offered():
    pool = _pool()
    with pytest.raises(ValueError, match="2 QPs offered, 1 answered"):
        connect_striped(pool, [(2, 0), (3, 0)], [(100, 0)], (PLANE_B, PLANE_B2), RoceConfig())


def test_the_qps_statistics_read_as_one_connections():
    pool = _pool()
    local = [(pool.allocate_qp(pool.roce), 0) for _ in range(3)]
    connect_striped(pool, local, [(100 + i, 0) for i in range(3)], (PLANE_B, PLANE_B2),
                    RoceConfig())  # fmt: skip
    for index, (qp, _psn) in enumerate(local):
        pool.roce.post_write(qp, bytes(1000 * (index + 1)), 0, 1)
    pool.datagrams_to_send(0.0)
    each = [pool.connection_stats(qp) for qp, _psn in local]
    merged = merged_stats(each)
    assert merged.qp == local[0][0]
    assert merged.data_bytes_sent == 6000 and merged.messages_posted == 3
    assert merged.bytes_in_flight == sum(s.bytes_in_flight for s in each)
    assert len(merged.evs) == 3
    assert merged_stats(each[:1]) is each[0]
    qps = [pool.roce.roce_stats(qp) for qp, _psn in local]
    roce = merged_roce_stats(qps)
    assert roce.state == "RTS" and roce.error is None
    assert roce.rate == pytest.approx(3 * RoceConfig().dcqcn.line_rate)
    failed = dataclasses.replace(qps[2], state="ERROR", error="retry counter exceeded")
    roce = merged_roce_stats([*qps[:2], failed])
    assert (roce.state, roce.error) == ("ERROR", "retry counter exceeded")
