"""The collective experiment's pure parts: the ring across leaves, the second job's ring,
what the links allow, the modes and their networks, the job each mode's contender runs, the
summary's MRC against the strongest RoCE, and recovery around an event."""

from __future__ import annotations

import dataclasses

import pytest

from collective.plans import Collective
from collective.rank import DEFAULT_SLICES
from collective.report import Failure, JobResult, RankIteration
from collective.roce import RoceSettings
from experiments.capabilities import target_facts
from experiments.collectives import may_fail
from experiments.collectives.figures import headline, summarize_runs, text
from experiments.collectives.job_report import IterationRecord, JobReport, job_report
from experiments.collectives.modes import CollectiveMode, Params, Scenario, modes_of, variant
from experiments.collectives.rings import (
    allowed_busbw,
    check_topology,
    ring_across_leaves,
    second_ring,
)
from experiments.collectives.run import CollectiveRun, EventRecord, Recovery, recovery
from experiments.json_form import to_json
from experiments.metrics import failed_transfer
from experiments.records import Failure as TransferFailure
from experiments.transports import Contender
from tests.unit.experiments.run_records import measured
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


def test_by_default_a_job_meets_nccl_and_adaptive_roce_in_every_scenario():
    modes = modes_of(Params())
    assert labels(modes[:4]) == (
        "mrc-clean",
        "single-clean",
        "roce:nccl-clean",
        "roce:adaptive-clean",
    )
    assert len(modes) == 4 * len(Scenario)
    assert [may_fail(m) for m in modes[:4]] == [False, False, True, True]
    assert labels(modes_of(Params(scenarios="loss", roce_profiles="perftest"))) == (
        "mrc-loss",
        "single-loss",
        "roce:perftest-loss",
    )


@pytest.mark.parametrize(
    ("transport", "roce"),
    [
        ("mrc", None),
        ("single", None),
        ("roce:nccl", RoceSettings("nccl", 2)),
        ("roce:adaptive:16qp", RoceSettings("adaptive", 16)),
        ("roce:perftest:t10", RoceSettings("perftest", 1, 10)),
    ],
)
def test_a_modes_job_runs_its_contender(transport, roce):
    spec = Params().job_spec(transport, ranks=16)
    assert spec.transport == transport.partition(":")[0]
    assert spec.roce() == roce
    assert spec.stall_timeout_s > 8 * 4.096e-6 * 2**20, "an nccl QP dies of its own retries"


def test_the_slice_count_reaches_every_modes_job():
    assert Params().job_spec("mrc", ranks=16).slices == DEFAULT_SLICES
    assert Params(slices=4).job_spec("roce:nccl", ranks=16).slices == 4


def test_a_runs_record_names_the_roce_its_job_ran():
    iterations = [[RankIteration(0.0, 1.0, 0.1)], [RankIteration(0.0, 1.0, 0.1)]]
    result = JobResult(Collective.ALLREDUCE, 2, 1024, 1, "roce", 0.0, 0.0, iterations)
    result.roce = RoceSettings("adaptive", 4, 10)
    assert to_json(job_report(result))["roce"] == {"profile": "adaptive", "qps": 4, "timeout": 10}


def test_a_mode_with_a_roce_label_is_read_back():
    assert str(mode("roce:nccl:16qp-cut-static")) == "roce:nccl:16qp-cut-static"
    assert mode("roce:adaptive-second-job").scenario is Scenario.SECOND_JOB


def test_bad_settings_are_refused(fabric):
    with pytest.raises(ValueError, match=r"roce:nccl:100qp: QPs to each peer must be in 1\.\.64"):
        Params(transports="roce:nccl:100qp").check()
    with pytest.raises(ValueError):
        Params(event_after=10, iterations=10).check()
    Params(scenarios="clean,loss", iterations=2).check()  # no event to place: any event_after
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


# -- the summary -------------------------------------------------------------------------------


def _report(label: str, busbw: float, failed: bool) -> JobReport:
    """The report of a job of contender ``label`` (NCCL's two QPs to a peer for RoCE)."""
    failure = Failure(12.0, 3, "rank 3: WRITE completed RETRY_EXC_ERR") if failed else None
    contender = Contender.parse(label)
    return JobReport(
        collective="allreduce",
        ranks=16,
        hosts=(),
        size_bytes=1 << 18,
        iterations=10,
        transport=contender.transport,
        roce=RoceSettings(contender.profile, 2) if contender.profile is not None else None,
        compute_s=0.0,
        bus_factor=1.875,
        completed_iterations=4 if failed else 10,
        per_iteration=(),
        time_per_iteration_s=1.0,
        algbw_Bps=busbw / 1.875,
        busbw_Bps=busbw,
        job_completion_s=None if failed else 10.0,
        network_wait_share=0.5,
        verified=() if failed else ("ok",),
        wrong_ranks=(),
        wrong_elements=0,
        failed=failed,
        failure=failure,
        ok=not failed,
    )


def _run(label: str, busbw: float, failed: bool = False, sequence: int = 0):
    job_mode = mode(label)
    record = CollectiveRun(
        mode=job_mode,
        routing="static",
        hosts=(),
        job=_report(job_mode.transport, busbw, failed),
        event=EventRecord(None, None),
        allowed_busbw_Bps=2e5,
        busbw_of_allowed=busbw / 2e5,
        recovery=Recovery(None, None, None, None),
        second_job=None,
        second_job_error=None,
        loss=None,
        transfers={},
        problems=(),
    )
    return measured(record, sequence)


def test_per_scenario_mrc_is_held_against_the_strongest_roce_a_dead_job_delivering_nothing():
    runs = {
        mode("mrc-clean"): {0: _run("mrc-clean", 1.3e5), 1: _run("mrc-clean", 1.5e5)},
        mode("single-clean"): {0: _run("single-clean", 7e4), 1: _run("single-clean", 7e4)},
        mode("roce:nccl-clean"): {0: _run("roce:nccl-clean", 5e4), 1: _run("roce:nccl-clean", 7e4)},
        mode("roce:adaptive-clean"): {
            0: _run("roce:adaptive-clean", 1e5),
            # it got further before it died, but a dead job trained nothing
            1: _run("roce:adaptive-clean", 1.2e5, failed=True),
        },
        mode("mrc-cut-static"): {0: _run("mrc-cut-static", 1e5), 1: _run("mrc-cut-static", 1e5)},
        mode("roce:nccl-cut-static"): {
            0: _run("roce:nccl-cut-static", 9e4, failed=True),
            1: _run("roce:nccl-cut-static", 9e4, failed=True),
        },
    }
    figures = summarize_runs(runs, target_facts("linux", None))
    written = to_json(figures)
    clean = written["mrc_against_strongest_roce_busbw"]["clean"]
    assert (clean["strongest"], clean["strongest_value"]) == ("roce:nccl", 6e4)
    assert clean["mrc_over_strongest"] == pytest.approx(1.4e5 / 6e4)
    assert clean["roce_values"] == [["roce:nccl", 6e4], ["roce:adaptive", 5e4]]
    cut = written["mrc_against_strongest_roce_busbw"]["cut-static"]
    assert (cut["strongest"], cut["strongest_value"], cut["mrc_over_strongest"]) == (
        "roce:nccl",
        0.0,
        None,
    )
    # the mode's own figures still give what its iterations ran at, and its failures
    assert written["roce:adaptive-clean"]["busbw_Bps_mean"] == pytest.approx(1.1e5)
    assert len(written["roce:nccl-cut-static"]["failures"]) == 2
    assert written["mrc_over_single_busbw"]["clean"]["busbw_ratio_mean"] == pytest.approx(2.0)
    lines = text(figures)
    assert (
        "busbw, clean (higher is better): strongest RoCE roce:nccl 0.06 MB/s, mrc 0.14 MB/s, "
        "mrc / strongest 2.33 (others: roce:adaptive 0.05)"
    ) in lines
    assert any(
        line.startswith("busbw, cut-static (higher is better): strongest RoCE roce:nccl 0 MB/s")
        for line in lines
    )


def test_a_runs_progress_figure_is_its_jobs_busbw_as_the_summary_writes_it():
    assert headline(_run("mrc-clean", 123456.0).record) == (
        "busbw 0.123 MB/s = 62 % of what the links allow"
    )
    dead = dataclasses.replace(
        _run("roce:nccl-cut-static", 50000.0, failed=True).record,
        transfers={"job": job_failed("rank 3: WRITE completed RETRY_EXC_ERR")},
    )
    assert headline(dead) == (
        "busbw 0.050 MB/s = 25 % of what the links allow, FAILED 1 of 1: "
        "rank 3: WRITE completed RETRY_EXC_ERR"
    )
    nothing = dataclasses.replace(
        dead, job=dataclasses.replace(dead.job, busbw_Bps=None), busbw_of_allowed=None
    )
    assert headline(nothing).startswith("no busbw (no iteration completed), FAILED")


def job_failed(error: str):
    """The job as a transfer, failed with ``error`` (as ``job_transfer`` records it)."""
    return failed_transfer(TransferFailure(error))
