"""The permutation workload on a simulated fabric: every host sends one message and receives
one, each flow completes with its bytes exact, a cut in the middle of it costs MRC packets but
no flow, RoCE runs over the same fabric in every profile (striped over the profile's QPs), a
cut that routing leaves in place kills the RoCE QPs hashed over it, and a run is a function of
its seed."""

from __future__ import annotations

import random

import pytest

from agent.core.config import MrcConfig
from agent.io.transport import roce_setup_for
from agent.roce.profiles import profile_names
from controller.intent.policy import RoutingPolicy
from simulation import SimFabric
from simulation.permutation import derangement, run_permutation, stripes
from tests.unit.simulation.fabrics import leaf_spine_cut_static
from topologies import load_topology
from topologies.link_lookup import find_link


def test_a_derangement_sends_once_and_receives_once_and_never_to_itself():
    names = [f"h{i}" for i in range(1, 17)]
    pairs = derangement(names, random.Random(3))
    assert sorted(a for a, _ in pairs) == sorted(names)
    assert sorted(b for _, b in pairs) == sorted(names)
    assert all(a != b for a, b in pairs)
    with pytest.raises(ValueError, match="at least two"):
        derangement(["h1"], random.Random(0))


def test_every_flow_of_a_permutation_completes_exact():
    result = run_permutation(SimFabric(load_topology("leaf-spine-4x4")), 128 * 1024, seed=1)
    assert result.completed == result.hosts == 16
    assert all(flow.exact for flow in result.flows)
    assert result.finished_s is not None and result.finished_s < 1.0
    assert result.cost.stats.delivered > 16 * 128  # every data packet crossed at least one link


@pytest.mark.parametrize("routing", ["static", "reactive"])
def test_a_spine_link_cut_mid_run_loses_packets_but_no_flow(routing):
    topology = load_topology("leaf-spine-4x4")
    fabric = SimFabric(topology, policy=RoutingPolicy.parse(routing))
    fabric.fail_at(0.0005, find_link(topology, "l1", "s1").id)
    result = run_permutation(fabric, 256 * 1024, seed=2)
    assert result.completed == 16 and all(flow.exact for flow in result.flows)
    assert result.cost.stats.dropped_down + result.cost.stats.no_route > 0


def test_one_ev_flows_complete_too():
    topology = load_topology("leaf-spine")
    fabric = SimFabric(topology, config=MrcConfig(dscp=topology.settings.dscp, ev_set_size=1))
    result = run_permutation(fabric, 64 * 1024)
    assert result.completed == 4 and all(flow.exact for flow in result.flows)


def test_the_same_seed_gives_the_same_run():
    def once() -> tuple:
        result = run_permutation(SimFabric(load_topology("leaf-spine"), seed=5), 64 * 1024, seed=5)
        return result.finished_s, result.cost.stats.events, result.cost.stats.ecn_marked

    assert once() == once()


def test_stripes_cover_the_message_contiguously_and_evenly():
    assert stripes(10, 1) == [(0, 10)]
    assert stripes(10, 3) == [(0, 3), (3, 6), (6, 10)]


@pytest.mark.parametrize("profile", profile_names())
def test_roce_flows_of_every_profile_complete_exact(profile):
    topology = load_topology("leaf-spine")
    roce = roce_setup_for(topology.settings.dscp, profile=profile)
    fabric = SimFabric(topology, roce=roce)
    result = run_permutation(fabric, 64 * 1024, seed=1)
    assert result.completed == 4 and all(flow.exact for flow in result.flows)
    assert result.cost.stats.trimmed == 0  # RoCE data rides the lossless class, never trimmed


def test_a_flow_over_several_qps_is_complete_only_when_every_stripe_is():
    topology = load_topology("leaf-spine")
    roce = roce_setup_for(topology.settings.dscp, profile="nccl", qps=3)
    fabric = SimFabric(topology, roce=roce)
    result = run_permutation(fabric, 64 * 1024 + 1, seed=1)
    assert result.completed == 4 and all(flow.exact for flow in result.flows)
    assert {len(host.endpoint.connections) for host in fabric.hosts.values()} == {6}


def test_a_cut_that_routing_leaves_in_place_kills_the_roce_qps_hashed_over_it_not_mrc():
    outcomes = {
        transport: run_permutation(
            leaf_spine_cut_static(transport, 0.0005), 256 * 1024, seed=0, limit_s=2.0
        )
        for transport in ("mrc", "roce")
    }
    assert outcomes["mrc"].completed == 16
    failed = [flow.failed for flow in outcomes["roce"].flows if flow.failed]
    assert failed and all("retry_cnt=7" in reason for reason in failed)
    assert outcomes["roce"].completed + len(failed) == 16
