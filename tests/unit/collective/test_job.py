"""Ranks on two in-process agents over the deterministic link (the host API for real, on a
stepped clock): every collective completes with exact results; ``single`` installs its
one-EV profile and reuses it; a RoCE job runs its profile over the QPs it asks for; a dead
network fails the job with when and why; a job in which nothing moves fails on its stall
timeout; the rendezvous waits for every rank; steps cut into slices end as exact."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.api import EvMode, ProfileState
from agent.core import MrcConfig
from agent.io.transport import SINGLE
from agent.roce import RoceEndpoint
from collective.job import (
    FIXED_EV_PROFILE_BASE,
    JobError,
    JobHooks,
    JobSpec,
    ev_profile_for,
    run_job,
)
from collective.plans import Collective
from collective.rank import RankWire, immediate, segments
from collective.rendezvous import FileRendezvous, RendezvousTimeout
from collective.report import summarize, text
from tests.unit.agent.api.harness import Agents

SINGLE_EV_PROFILE_ID = FIXED_EV_PROFILE_BASE + 1  # the one-EV profile's id


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Agents]:
    made = Agents(tmp_path, MrcConfig(peer_timeout=0.05))
    yield made
    made.close()


def run(agents: Agents, spec: JobSpec, hooks: JobHooks | None = None):
    contexts = [agents.context("a"), agents.context("b")]
    return run_job(spec, contexts, hooks=hooks, wait=lambda _t: agents.pump(), clock=agents.clock)


@pytest.mark.parametrize("collective", list(Collective))
def test_every_collective_completes_with_exact_results(agents, collective):
    records = []
    spec = JobSpec(collective, 96 * 1024, iterations=3, segment_bytes=8192)
    result = run(agents, spec, JobHooks(on_iteration=records.append))
    summary = summarize(result)
    assert summary["ok"], summary
    assert summary["completed_iterations"] == 3 and len(summary["verified"]) == 2
    assert [r["iteration"] for r in records] == [0, 1, 2], "progress once per iteration"
    assert all(r["time_s"] > 0 for r in records)


@pytest.mark.parametrize("slices", [2, 5])
@pytest.mark.parametrize("collective", list(Collective))
def test_with_slices_every_collective_completes_with_exact_results(agents, collective, slices):
    spec = JobSpec(collective, 96 * 1024, iterations=2, segment_bytes=8192, slices=slices)
    summary = summarize(run(agents, spec))
    assert summary["ok"], summary
    assert summary["slices"] == slices
    assert f"{slices} slices a step" in text(summary)[0]


def test_slices_that_do_not_fit_a_chunk_are_refused_before_anything_runs(agents):
    # two ranks, 16 float32s a chunk
    with pytest.raises(JobError, match=r"slices must be in 1\.\.16"):
        run(agents, JobSpec(Collective.ALLREDUCE, 128, slices=17))


def test_the_launcher_hears_each_ranks_qp_numbers_as_its_agent_lists_them(agents):
    heard: list[list[list[int]]] = []
    spec = JobSpec(Collective.ALLREDUCE, 8 * 1024, iterations=1)
    assert run(agents, spec, JobHooks(on_connected=heard.append)).ok
    ((qps_a, qps_b),) = heard
    for runtime, qps in ((agents.a, qps_a), (agents.b, qps_b)):
        assert qps and set(qps) <= set(runtime.pool.qps)
        assert all(runtime.pool.connection_stats(qp).data_packets_sent > 0 for qp in qps)


def test_compute_time_separates_iterations(agents):
    spec = JobSpec(Collective.ALLREDUCE, 8 * 1024, iterations=2, compute_s=0.01)
    result = run(agents, spec)
    assert result.ok
    for first, second in result.per_rank:
        # at least the compute time, at most a turn of the stepped clock more
        assert 0.01 - 1e-9 <= second.start - first.end <= 0.01 + 1e-4
    assert summarize(result)["job_completion_s"] >= 0.02 - 1e-9


def test_single_installs_a_one_ev_profile_once(agents):
    spec = JobSpec(Collective.ALLREDUCE, 16 * 1024, iterations=2, transport="single")
    assert summarize(run(agents, spec))["ok"]
    controller = agents.controller("a")
    attrs, _ = controller.query_ev_profile(SINGLE_EV_PROFILE_ID)
    assert attrs["cur_profile_state"] == ProfileState.ONLINE.name
    assert (attrs["ev_mode"], attrs["ev_count"]) == (EvMode.AUTO.name, 1)
    # a second job finds it in place
    assert ev_profile_for(agents.context("a"), SINGLE) == SINGLE_EV_PROFILE_ID
    assert summarize(run(agents, spec))["ok"]


def test_a_profile_id_taken_with_other_settings_is_refused(agents):
    controller = agents.controller("a")
    controller.modify_ev_profile(
        SINGLE_EV_PROFILE_ID, profile_state=ProfileState.OFFLINE, ev_mode=EvMode.AUTO, ev_count=8
    )
    controller.modify_ev_profile(SINGLE_EV_PROFILE_ID, profile_state=ProfileState.ONLINE)
    with pytest.raises(JobError, match="in use with other settings"):
        ev_profile_for(agents.context("a"), SINGLE)


def test_bad_sizes_and_transports_are_refused_before_anything_runs(agents):
    with pytest.raises(JobError, match="multiple of 4"):
        run(agents, JobSpec(Collective.ALLREDUCE, 1022))
    with pytest.raises(JobError, match="unknown transport"):
        run(agents, JobSpec(Collective.ALLREDUCE, 1024, transport="udp"))


@pytest.mark.parametrize("collective", [Collective.ALLREDUCE, Collective.ALLTOALL])
def test_a_roce_job_runs_on_rc_qps_with_exact_results(agents, collective):
    heard: list[list[list[int]]] = []
    spec = JobSpec(collective, 64 * 1024, iterations=2, transport="roce", segment_bytes=8192)
    summary = summarize(run(agents, spec, JobHooks(on_connected=heard.append)))
    assert summary["ok"], summary
    assert summary["transport"] == "roce" and summary["completed_iterations"] == 2
    assert summary["roce"] == {"profile": "perftest", "qps": 1, "timeout": None}
    ((qps_a, qps_b),) = heard
    for runtime, qps in ((agents.a, qps_a), (agents.b, qps_b)):
        assert all(isinstance(runtime.pool.owner(qp), RoceEndpoint) for qp in qps)
        assert all(runtime.pool.connection_stats(qp).data_packets_sent > 0 for qp in qps)


@pytest.mark.parametrize(
    ("settings", "qps", "timeout"),
    [
        ({"roce_profile": "nccl"}, 2, 20),
        ({"roce_profile": "adaptive", "roce_qps": 4, "roce_timeout": 10}, 4, 10),
    ],
)
def test_a_roce_job_runs_its_profile_over_the_qps_it_asks_for(agents, settings, qps, timeout):
    heard: list[list[list[int]]] = []
    spec = JobSpec(
        Collective.ALLREDUCE,
        64 * 1024,
        iterations=2,
        transport="roce",
        segment_bytes=4096,
        **settings,
    )
    summary = summarize(run(agents, spec, JobHooks(on_connected=heard.append)))
    assert summary["ok"], summary
    profile = settings["roce_profile"]
    assert summary["roce"] == {
        "profile": profile,
        "qps": qps,
        "timeout": settings.get("roce_timeout"),
    }
    assert f"(roce, profile {profile}, {qps} QPs to each peer" in text(summary)[0]
    ((qps_a, qps_b),) = heard
    # two ranks: each rank's one peer is both its neighbours
    assert len(qps_a) == len(qps_b) == qps
    for runtime, numbers in ((agents.a, qps_a), (agents.b, qps_b)):
        for qp in numbers:
            roce = runtime.pool.roce.roce_stats(qp)
            assert roce.local_ack_timeout == pytest.approx(4.096e-6 * 2**timeout)
            assert roce.selective_repeat is (profile == "adaptive")
            assert runtime.pool.connection_stats(qp).data_packets_sent > 0, "round-robin"
        ports = {runtime.pool.roce.roce_stats(qp).src_port for qp in numbers}
        assert len(ports) > 1, "each QP on its own UDP source port, for ECMP to hash apart"


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ({"roce_profile": "nccl"}, "transport mrc takes no RoCE profile"),
        ({"transport": "single", "roce_qps": 2}, "transport single takes no RoCE"),
        ({"transport": "roce", "roce_profile": "ib"}, "unknown RoCE profile 'ib'"),
        ({"transport": "roce", "roce_qps": 0}, r"QPs to each peer must be in 1\.\.64"),
        ({"transport": "roce", "roce_timeout": 32}, r"verbs timeout is 0\.\.31"),
    ],
)
def test_roce_settings_are_refused_where_they_do_not_go_before_anything_runs(
    agents, settings, refusal
):
    with pytest.raises(JobError, match=refusal):
        run(agents, JobSpec(Collective.ALLREDUCE, 1024, **settings))


def test_a_roce_job_whose_path_dies_fails_when_its_retries_run_out(agents):
    def cut(_at: float) -> None:
        agents.drop("a", lambda _datagram: True)

    spec = JobSpec(Collective.ALLREDUCE, 64 * 1024, iterations=2, transport="roce")
    summary = summarize(run(agents, spec, JobHooks(on_start=cut)))
    assert summary["failed"] and not summary["ok"]
    failure = summary["failure"]
    assert "RETRY_EXC_ERR" in failure["reason"], failure
    # retry_cnt 7 after a 67 ms local ACK timeout: eight waits, long before the stall timeout
    assert 0.5 < failure["at_s"] < 1.0


def test_a_network_that_dies_fails_the_job_with_when_and_why(agents):
    started = []

    def cut(at: float) -> None:
        started.append(at)
        agents.drop("a", lambda _datagram: True)
        agents.drop("b", lambda _datagram: True)

    spec = JobSpec(Collective.ALLREDUCE, 64 * 1024, iterations=2, stall_timeout_s=5.0)
    summary = summarize(run(agents, spec, JobHooks(on_start=cut)))
    assert summary["failed"] and not summary["ok"]
    failure = summary["failure"]
    assert failure["rank"] in (0, 1)
    assert "completed" in failure["reason"] and "rank" in failure["reason"]
    assert 0 < failure["at_s"] < 5.0, "the QP's own failure, well before the stall timeout"
    assert summary["verified"] == []


def test_a_job_in_which_nothing_moves_fails_on_its_stall_timeout(agents):
    spec = JobSpec(Collective.ALLREDUCE, 8 * 1024, iterations=1, stall_timeout_s=0.001)
    hooks = JobHooks(on_start=lambda _at: agents.drop("a", lambda _d: True))
    summary = summarize(run(agents, spec, hooks))
    assert summary["failed"]
    reason = summary["failure"]["reason"]
    assert reason.startswith("no progress for 0.001 s") and "waits for" in reason


def test_the_launcher_can_stop_a_job(agents):
    hooks = JobHooks()
    hooks.on_start = lambda _at: hooks.stop.set()
    summary = summarize(run(agents, JobSpec(Collective.ALLREDUCE, 8 * 1024), hooks))
    assert summary["failed"] and summary["failure"]["reason"] == "stopped by the launcher"


def test_rendezvous_gathers_in_rank_order_and_names_the_missing(tmp_path):
    tmp_path = tmp_path / "meeting"
    now = [0.0]
    meeting = FileRendezvous(tmp_path, 3, timeout_s=1.0, poll_s=0.0, clock=lambda: now[0])
    meeting.publish("wire", 2, {"rank": 2})
    meeting.publish("wire", 0, {"rank": 0})

    def later() -> float:
        now[0] += 0.5
        return now[0]

    meeting.clock = later
    with pytest.raises(RendezvousTimeout, match=r"ranks \[1\]"):
        meeting.gather("wire")
    meeting.publish("wire", 1, {"rank": 1})
    assert [r["rank"] for r in meeting.gather("wire")] == [0, 1, 2]
    assert not list(tmp_path.glob("*.tmp*")), "published by rename, nothing half-written"
    with pytest.raises(ValueError):
        meeting.publish("wire", 3, {})
    with pytest.raises(ValueError):
        meeting.publish("../x", 0, {})


def test_rank_records_round_trip_and_bad_ones_are_refused():
    wire = RankWire(1, ("10.0.1.1",), 0x1000, 7, {0: ((0x22, 5),), 2: ((0x23, 6), (0x24, 9))})
    assert RankWire.from_json(wire.to_json()) == wire
    with pytest.raises(ValueError, match="malformed"):
        RankWire.from_json({"rank": 1})


def test_immediates_and_segments():
    assert immediate(2, 3) == (2 << 16) | 3, "slice 0: the immediate of a job without slices"
    assert immediate(0x102, 3, 5) == (5 << 24) | (2 << 16) | 3, "the iteration wraps at 8 bits"
    assert immediate(0, 0xFFFF, 255) == 0xFF00_FFFF, "the step keeps 16 bits"
    with pytest.raises(ValueError, match="slice 256"):
        immediate(0, 0, 256)
    assert segments(10, 4) == [(0, 4), (4, 4), (8, 2)]
    assert segments(8, 8) == [(0, 8)]
