"""The collective experiment's pure parts: the ring across leaves, the second job's ring,
what the links allow, the modes and their networks, and recovery around an event."""

from __future__ import annotations

import pytest

from experiments.collectives import may_fail
from experiments.collectives.job_report import IterationRecord
from experiments.collectives.modes import CollectiveMode, Params, modes_of, variant
from experiments.collectives.rings import (
    allowed_busbw,
    check_topology,
    ring_across_leaves,
    second_ring,
)
from experiments.collectives.run import recovery
from experiments.json_form import to_json
from topologies import load_topology

mode = CollectiveMode.parse


def labels(modes):
    return tuple(str(m) for m in modes)


@pytest.fixture(scope="module")
def fabric():
    return load_topology("leaf-spine-4x4")


def test_the_ring_crosses_a_leaf_at_every_step(fabric):
    ring = ring_across_leaves(fabric)
    assert ring[:5] == ["h1", "h5", "h9", "h13", "h2"]
    assert sorted(ring) == sorted(h.name for h in fabric.hosts)
    leaf = {h.name: h.nics[0].switch for h in fabric.hosts}
    assert all(leaf[a] != leaf[b] for a, b in zip(ring, ring[1:] + ring[:1], strict=True))


def test_the_second_job_takes_the_leaves_in_another_order(fabric):
    assert second_ring(fabric)[:4] == ["h1", "h9", "h5", "h13"]


def test_links_allow_a_spine_per_flow_leaving_a_leaf(fabric):
    params = Params(fabric_rate_pps=200, payload_bytes=1024)
    # four flows leave each leaf over four spines: one link's rate each
    assert allowed_busbw(fabric, ring_across_leaves(fabric), params) == 200 * 1024
    # one rank per leaf: one flow per four spines, still capped at one link (no spraying
    # gives a flow more than its share in this figure)
    assert allowed_busbw(fabric, ["h1", "h5", "h9", "h13"], params) == 200 * 1024


def test_modes_and_their_routing():
    params = Params(transports="mrc,single", scenarios="clean,cut-converge")
    assert labels(modes_of(params)) == (
        "mrc-clean",
        "single-clean",
        "mrc-cut-converge",
        "single-cut-converge",
    )
    assert variant(params, mode("mrc-clean")).routing == "static"
    assert variant(params, mode("mrc-cut-converge")).routing == "converge:3"
    assert variant(params, mode("mrc-clean")) == variant(params, mode("single-clean")), (
        "one bring-up"
    )
    with pytest.raises(ValueError, match="unknown scenario"):
        modes_of(Params(scenarios="reboot"))


def test_roce_runs_and_only_its_failures_are_results():
    modes = modes_of(Params(transports="mrc,single,roce:nccl", scenarios="clean"))
    assert labels(modes) == ("mrc-clean", "single-clean", "roce:nccl-clean")
    assert [may_fail(m) for m in modes] == [False, False, True]


def test_bad_settings_are_refused(fabric):
    with pytest.raises(ValueError):
        Params(event_after=10, iterations=10).check()
    with pytest.raises(ValueError, match="SPINE:LEAF"):
        Params(cut="s1").check()
    with pytest.raises(ValueError, match="no link joins"):
        check_topology(fabric, Params(cut="l1:l2"))
    with pytest.raises(ValueError, match="distinct hosts"):
        check_topology(fabric, Params(hosts="h1,h1"))


def _job(times):
    """The per-iteration records of a job whose iterations took ``times``."""
    records, t = [], 0.0
    for index, time_s in enumerate(times):
        records.append(IterationRecord(index, t, t + time_s, time_s, 0.0, 0.0))
        t += time_s
    return tuple(records)


def test_recovery_counts_iterations_until_one_is_back_to_normal():
    job = _job([1.0, 1.0, 1.0, 3.0, 1.6, 1.1, 1.0])
    got = to_json(recovery(job, event_at_s=3.5))
    assert got == {"baseline_s": 1.0, "event_iteration": 3, "slowdown": 3.0, "iterations": 2}
    assert to_json(recovery(_job([1.0, 1.0, 1.0, 1.1]), 2.5))["iterations"] == 0
    assert to_json(recovery(_job([1.0, 1.0, 4.0, 4.0]), 2.5))["iterations"] is None
    assert to_json(recovery(job, None))["event_iteration"] is None
