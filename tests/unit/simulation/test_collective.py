"""A collective job on the simulated fabric: the testbed's plans and arithmetic, a rank a host;
every collective completes with every rank's result exact, over MRC and RoCE alike; an
unfinished result is told apart; a cut that routing leaves in place aborts the RoCE job (its QP
out of retries) and not MRC's; bus bandwidth is reported as nccl-tests does."""

from __future__ import annotations

import pytest

from agent.io.transport import roce_setup_for
from collective.plans import Collective
from simulation import SimFabric
from simulation.collective import _Job, run_collective
from tests.unit.simulation.fabrics import leaf_spine_cut_static
from topologies import load_topology


@pytest.mark.parametrize("collective", list(Collective))
def test_every_collective_completes_exact_on_every_rank(collective):
    result = run_collective(SimFabric(load_topology("leaf-spine-4x4")), collective, 64 * 1024)
    assert result.failed is None and result.wrong_ranks == 0
    assert result.ranks == 16 and result.completed_s is not None
    factor = {"allreduce": 30 / 16}.get(collective.value, 15 / 16)  # nccl-tests' bus factors
    assert result.busbw == pytest.approx(result.size / result.completed_s * factor)


@pytest.mark.parametrize("profile", ["perftest", "nccl"])
def test_a_roce_all_reduce_completes_exact(profile):
    topology = load_topology("leaf-spine")
    roce = roce_setup_for(topology.settings.dscp, profile=profile)
    result = run_collective(SimFabric(topology, roce=roce), Collective.ALLREDUCE, 64 * 1024)
    assert result.failed is None and result.wrong_ranks == 0


def test_a_rank_whose_output_is_not_the_sum_is_counted_wrong():
    job = _Job(SimFabric(load_topology("leaf-spine")), Collective.ALLREDUCE, 64 * 1024)
    assert job.wrong_ranks() == 4  # nothing ran: every OUT still holds zeros


def test_a_cut_that_routing_leaves_in_place_aborts_the_roce_job_not_mrcs():
    results = {
        transport: run_collective(
            leaf_spine_cut_static(transport, 0.001), Collective.ALLREDUCE, 256 * 1024, limit_s=3
        )
        for transport in ("mrc", "roce")
    }
    assert results["mrc"].failed is None and results["mrc"].wrong_ranks == 0
    failed = results["roce"].failed
    assert results["roce"].completed_s is None and failed is not None and "retry_cnt=7" in failed


def test_roce_qps_on_the_second_plane_leave_through_its_nic():
    topology = load_topology("two-plane")
    roce = roce_setup_for(topology.settings.dscp, profile="nccl", qps=2)
    fabric = SimFabric(topology, roce=roce)
    result = run_collective(fabric, Collective.ALLREDUCE, 64 * 1024)
    assert result.failed is None and result.wrong_ranks == 0
    for name in fabric.hosts:
        assert all(link.counters.data_offered > 0 for link in fabric.uplinks(name))
