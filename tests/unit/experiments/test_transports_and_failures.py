"""The failover and loss experiments' pure parts: their modes (transports x routing policies x
placements; transports x loss rates) and how they map to bring-ups, counters that fell,
several flows on one clock, stalls, the per-transport invariants (a RoCE transfer that fails
is a result, an MRC one an error), and retention of lossless goodput. What each placement
breaks: test_placements.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from experiments import failover, loss, transports
from experiments.capabilities import TargetFacts
from experiments.collectives.modes import CollectiveMode
from experiments.counters import CountersUnavailable, forwarded_between
from experiments.experiment import parse_params
from experiments.fabric_loss import FabricLoss
from experiments.failover.modes import FailoverMode, modes_of
from experiments.failover.run import uncut_reason
from experiments.invariants import invariant_lines, invariants
from experiments.json_form import to_json
from experiments.loss import figures as loss_figures
from experiments.loss import modes as loss_modes
from experiments.loss.modes import LossMode
from experiments.loss.run import LossRun
from experiments.plan import plan_bring_ups
from experiments.records import Failure, Run
from experiments.registry import EXPERIMENTS
from experiments.stats import spread_problems
from experiments.timeline import RunClock, aggregate, flow_series, longest_stall
from testbed.agents import TransferSpec
from tests.unit.experiments.run_records import Transfers, measured, run_verdict, transfer
from topologies import load_topology


def labels(modes: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple(str(mode) for mode in modes)


BMV2 = TargetFacts("bmv2", trimming=True, ecn_marking=True, ecn_by="mrc.p4")


def _status(packets: dict[str, dict[int, int]]) -> dict[str, Any]:
    """A controller status with member ``i`` of every switch forwarding out of port ``i``."""
    return {
        "groups": {
            sw: [{"members": [{"member_index": p, "port": p} for p in ports]}]
            for sw, ports in packets.items()
        },
        "counters": {
            sw: {"members": {str(p): {"packets": n, "bytes": 0} for p, n in ports.items()}}
            for sw, ports in packets.items()
        },
    }


# -- modes -----------------------------------------------------------------------------------


def test_failover_by_default_compares_mrc_with_every_roce_profile_static_and_converging() -> None:
    params = parse_params(EXPERIMENTS["failover"], {})
    contenders = ("mrc", "single", "roce:perftest", "roce:nccl", "roce:adaptive")
    assert labels(modes_of(params)) == tuple(
        f"{contender}-{routing}-remote"
        for routing in ("static", "converge:3")
        for contender in contenders
    )
    mode = FailoverMode.parse("roce:nccl-converge:3-switch")
    assert (mode.transport, str(mode.routing), mode.placement) == (
        "roce:nccl",
        "converge:3",
        "switch",
    )


def test_failover_modes_are_transports_x_policies_x_placements_one_bring_up_per_policy() -> None:
    experiment = EXPERIMENTS["failover"]
    params = parse_params(
        experiment,
        {
            "transports": "mrc,roce:nccl",
            "routings": "static,converge",
            "placements": "local,remote",
        },
    )
    modes = labels(modes_of(params))
    assert (
        len(modes) == 8
        and modes[0] == "mrc-static-local"
        and modes[-1] == "roce:nccl-converge:3-remote"
    )
    plan = plan_bring_ups(experiment, params, seeds=2)
    # seed 0: static then converge; seed 1 reversed: converge continues, then static
    assert [b.suffix for b in plan] == [
        "-mrc-static-local",
        "-mrc-converge:3-local",
        "-mrc-static-local",
    ]
    assert [len(b.runs) for b in plan] == [4, 8, 4]
    assert failover.variant(params, FailoverMode.parse("mrc-converge:3-local")).routing == (
        "converge:3"
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"transports": "mrc,tcp"}, "unknown transport tcp"),
        ({"routings": "ospf"}, "routing must be static, reactive, converge or converge:SECONDS"),
        ({"placements": "cable"}, "unknown placement cable"),
        ({"flows": "h1-h3"}, "expected SOURCE:DESTINATION"),
        ({"flows": "h1:h3,h1:h3"}, "listed twice"),
        ({"transports": "mrc,mrc"}, "listed twice"),
        ({"transports": "roce,roce:nccl"}, "listed twice: roce:nccl"),
        ({"transports": "roce:fast"}, "'fast' is no RoCE profile"),
        ({"transports": "mrc:nccl"}, "mrc takes no RoCE profile"),
        ({"roce_profiles": "nccl,ib"}, "unknown RoCE profile ib"),
    ],
)
def test_failover_refuses_modes_and_flows_it_cannot_run(
    settings: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        parse_params(EXPERIMENTS["failover"], settings)


def test_routing_policies_are_normalised() -> None:
    assert transports.parse_routing("converge") == "converge:3"
    assert transports.parse_routing("converge:0.5") == "converge:0.5"
    assert transports.parse_routings("static, reactive") == ("static", "reactive")
    with pytest.raises(ValueError, match="converge:SECONDS takes seconds"):
        transports.parse_routing("converge:soon")


def test_failover_needs_flows_across_leaves_and_nic_needs_a_second_nic() -> None:
    experiment = EXPERIMENTS["failover"]
    leaf_spine, two_plane = load_topology("leaf-spine"), load_topology("two-plane")
    with pytest.raises(ValueError, match="both hosts are on"):
        failover.check_topology(leaf_spine, parse_params(experiment, {"flows": "h1:h2"}))
    nic = parse_params(experiment, {"placements": "nic"})
    with pytest.raises(ValueError, match="TOPO=two-plane"):
        failover.check_topology(leaf_spine, nic)
    failover.check_topology(two_plane, nic)


def test_reboot_is_failover_with_a_spine_losing_power_under_four_flows() -> None:
    params = parse_params(EXPERIMENTS["reboot"], {})
    assert params.flow_pairs() == [("h1", "h3"), ("h2", "h4"), ("h3", "h1"), ("h4", "h2")]
    contenders = ("mrc", "single", "roce:perftest", "roce:nccl", "roce:adaptive")
    assert labels(modes_of(params)) == tuple(
        f"{contender}-{routing}-switch"
        for routing in ("static", "converge:3")
        for contender in contenders
    )


def test_loss_modes_go_rate_by_rate_with_every_roce_profile_and_perftests_timer_swept() -> None:
    experiment = EXPERIMENTS["loss"]
    params = parse_params(experiment, {})
    modes = labels(loss_modes.modes_of(params))
    at_zero = (
        "mrc@0%",
        "single@0%",
        "roce:perftest@0%",
        "roce:nccl@0%",
        "roce:adaptive@0%",
        "roce:perftest:t10@0%",
        "roce:perftest:t12@0%",
    )
    assert modes[:7] == at_zero
    assert modes[-1] == "roce:perftest:t12@5%" and len(modes) == 28
    assert tuple(map(loss_modes.rate_text, params.rates())) == ("0", "0.1", "1", "5")
    (only,) = plan_bring_ups(experiment, params, seeds=2)
    last = LossMode.parse("roce:perftest:t12@5%")
    assert only.runs[27] == (0, last) and only.runs[28] == (1, last)
    for bad, message in (("1,1", "listed twice"), ("x", "not a number"), ("80", "outside")):
        with pytest.raises(ValueError, match=message):
            parse_params(experiment, {"rates_percent": bad})


def test_the_timeout_sweep_is_perftests_and_checked() -> None:
    experiment = EXPERIMENTS["loss"]
    only_nccl = parse_params(
        experiment, {"transports": "mrc,roce:nccl", "perftest_timeouts": "", "rates_percent": "1"}
    )
    assert labels(loss_modes.modes_of(only_nccl)) == ("mrc@1%", "roce:nccl@1%")
    for settings, message in (
        ({"transports": "mrc,roce:nccl"}, "not among the transports"),
        ({"perftest_timeouts": "10,10"}, "listed twice"),
        ({"perftest_timeouts": "40"}, "no verbs timeout"),
        ({"transports": "roce:perftest,roce:perftest:t10"}, "both a transport and a swept"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_params(experiment, settings)


# -- transfer options ----------------------------------------------------------------------


def test_a_roce_transfer_asks_for_its_verbs_settings() -> None:
    assert TransferSpec("h1", "h3", transport="roce", roce_retry_cnt=3).request_options() == {
        "transport": "roce",
        "evs": None,
        "roce_timeout": None,
        "roce_retry_cnt": 3,
    }


# -- counters ------------------------------------------------------------------------------


def test_counters_that_fell_belong_to_a_restarted_switch_and_are_not_read() -> None:
    with pytest.raises(CountersUnavailable, match="restarted"):
        forwarded_between(_status({"s1": {1: 500}}), _status({"s1": {1: 3}}), "s1")


# -- several flows, one clock ----------------------------------------------------------------


class _Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_flows_are_placed_on_one_clock_from_their_earliest_start() -> None:
    ticks = _Ticks()
    clock = RunClock(ticks)
    assert not clock.started
    with pytest.raises(RuntimeError, match="not started"):
        clock.now()
    ticks.now = 100.3
    clock.observe(1, {"elapsed_s": 0.1})  # flow 1 began at 100.2
    ticks.now = 100.35
    clock.observe(0, {"elapsed_s": 0.2})  # flow 0 at 100.15: the run's zero
    ticks.now = 100.41
    clock.observe(1, {"elapsed_s": 0.2})  # a late sample never moves a start later
    assert clock.offset(0) == 0.0 and clock.offset(1) == pytest.approx(0.05)
    assert clock.at(101.15) == pytest.approx(1.0)
    assert clock.failed_at(101.15, launched=100.0) == pytest.approx(1.0)
    # a transfer that failed before any sample is placed from when it was asked for
    assert RunClock(ticks).failed_at(101.15, launched=100.65) == pytest.approx(0.5)


def _sample(elapsed: float, nbytes: float, seconds: float = 0.1) -> dict[str, float]:
    return {
        "elapsed_s": elapsed,
        "bytes": nbytes,
        "seconds": seconds,
        "goodput_bps": nbytes * 8 / seconds,
        "total_bytes": 0,
    }


def test_flows_that_started_apart_add_up_bin_by_bin() -> None:
    one = flow_series([_sample(0.1, 100), _sample(0.2, 100)], offset=0.0)
    other = flow_series([_sample(0.1, 200), _sample(0.2, 200)], offset=0.05)
    total = aggregate([one, other], bin_s=0.1)
    assert [round(p["bytes"]) for p in total] == [200, 300, 100]
    assert total[1]["goodput_bps"] == pytest.approx(300 * 8 / 0.1)
    assert aggregate([one], 0.1) == one  # one flow is drawn as measured


def test_the_longest_stall_is_the_longest_run_of_bins_with_nothing_confirmed() -> None:
    series = flow_series(
        [_sample(0.1 * (i + 1), n) for i, n in enumerate([5, 0, 0, 5, 0, 0, 0, 5])], 0.0
    )
    assert longest_stall(series) == pytest.approx(0.3)
    # a transfer that failed 0.45 s after its last bin stalled from its last confirmation on
    tail = flow_series([_sample(0.1, 5), _sample(0.2, 0)], 0.0)
    assert longest_stall(tail, ended_s=0.65) == pytest.approx(0.55)


# -- invariants ------------------------------------------------------------------------------


def _run(completed: bool, lost: int | None, error: str | None = None) -> Transfers:
    failure = None if error is None else Failure(error, failed_at_s=5.62)
    return Transfers({"h1->h3": transfer(completed, lost, failure=failure)})


def test_a_roce_transfer_that_ran_out_of_retries_is_a_result_an_mrc_one_an_error() -> None:
    mrc, roce = FailoverMode.parse("mrc-static-remote"), FailoverMode.parse("roce-static-remote")
    runs = {
        mrc: {0: _run(True, 0)},
        roce: {0: _run(False, None, "QP in error: retries exhausted")},
    }
    result = invariants(runs, failover.may_fail)
    held = to_json(result)
    assert held["held"] and held["strict_modes"] == ["mrc-static-remote"]
    assert held["failures_as_results"] == [
        "0/roce-static-remote/h1->h3 failed at 5.62 s: QP in error: retries exhausted"
    ]
    lines = invariant_lines(result)
    assert lines[0].startswith("invariants: bytes lost 0, every transfer completed: yes (of the")
    runs[mrc][0] = _run(False, None, "peer gone")
    assert not invariants(runs, failover.may_fail).held


def test_a_roce_transfer_that_completed_must_have_lost_nothing() -> None:
    roce = LossMode.parse("roce@1%")
    runs = {roce: {0: _run(True, 4096)}, LossMode.parse("mrc@1%"): {0: _run(True, 0)}}
    held = to_json(invariants(runs, loss.may_fail))
    assert not held["held"]
    assert held["violations"] == ["0/roce@1%/h1->h3 completed yet lost 4096 bytes"]
    runs[roce][0] = _run(False, None)  # failed without saying why
    assert to_json(invariants(runs, loss.may_fail))["violations"] == [
        "0/roce@1%/h1->h3 did not complete and recorded no error"
    ]


# -- loss: retention -------------------------------------------------------------------------


def _loss_run(
    goodput: float, sequence: int, measured_percent: float = 1.0, error: str = ""
) -> Run[LossRun]:
    """A run of the loss experiment; :func:`_loss_runs` gives it its mode."""
    failure = Failure(error) if error else None
    flow = transfer(not error, 0, goodput_bps=goodput, failure=failure)
    record = LossRun(
        mode=LossMode("mrc", 0.0),
        routing=None,
        evs=None,
        transfers={"h1->h3": flow},
        loss=FabricLoss(100, 1, measured_percent, 0),
        problems=(),
    )
    return measured(record, sequence, run_verdict("neither saturated", 0.5, 0.5))


def _loss_runs(
    runs: dict[str, dict[int, Run[LossRun]]],
) -> dict[LossMode, dict[int, Run[LossRun]]]:
    """``runs`` by their modes' labels, each record given its mode."""
    typed = {}
    for label, seeds in runs.items():
        mode = LossMode.parse(label)
        typed[mode] = {
            seed: dataclasses.replace(run, record=dataclasses.replace(run.record, mode=mode))
            for seed, run in seeds.items()
        }
    return typed


def test_each_transport_keeps_a_share_of_its_own_lossless_goodput_seed_by_seed() -> None:
    runs = _loss_runs(
        {
            "mrc@0%": {0: _loss_run(100.0, 0), 1: _loss_run(80.0, 7)},
            "roce:nccl@0%": {0: _loss_run(100.0, 1), 1: _loss_run(100.0, 6)},
            "mrc@1%": {0: _loss_run(90.0, 2), 1: _loss_run(76.0, 5)},
            "roce:nccl@1%": {0: _loss_run(20.0, 3), 1: _loss_run(30.0, 4)},
        }
    )
    summary = loss_figures.summarize(runs, BMV2)
    figures = to_json(summary)
    assert figures["retention"]["mrc"]["1"]["retention_mean"] == pytest.approx((0.9 + 0.95) / 2)
    assert figures["retention"]["roce:nccl"]["1"]["retention_min"] == pytest.approx(0.2)
    assert figures["retention"]["mrc"]["0"]["retention_mean"] == pytest.approx(1.0)
    assert figures["mrc_over_roce"]["roce:nccl"]["1"]["ratio_mean"] == pytest.approx(
        (4.5 + 76 / 30) / 2
    )
    assert spread_problems(figures) == []
    lines = loss_figures.text(summary)
    assert any(line.startswith("mrc keeps of its lossless goodput: 0 %: 1.00") for line in lines)
    assert any(
        "MRC / roce:nccl goodput: 0 %: 0.90 (0.80-1.00) over 2 seeds" in line for line in lines
    )


def test_at_each_rate_mrc_is_held_against_the_strongest_roce() -> None:
    runs = _loss_runs(
        {
            "mrc@1%": {0: _loss_run(90.0, 0), 1: _loss_run(80.0, 5)},
            "roce:perftest@1%": {0: _loss_run(10.0, 1), 1: _loss_run(10.0, 6)},
            "roce:adaptive@1%": {0: _loss_run(60.0, 2), 1: _loss_run(40.0, 7)},
            "roce:perftest:t10@1%": {0: _loss_run(30.0, 3), 1: _loss_run(20.0, 8)},
        }
    )
    summary = loss_figures.summarize(runs, BMV2)
    figures = to_json(summary)
    at_1 = figures["strongest_roce"]["1"]
    assert at_1["strongest"] == "roce:adaptive"
    assert at_1["mrc_over_strongest"] == pytest.approx(85.0 / 50.0)
    assert at_1["mrc_over_strongest_per_seed_mean"] == pytest.approx((1.5 + 2.0) / 2)
    assert [label for label, _ in at_1["roce_values"]] == [
        "roce:adaptive",
        "roce:perftest:t10",
        "roce:perftest",
    ]
    lines = loss_figures.text(summary)
    assert any(
        line.startswith("goodput at 1 % (higher is better): strongest RoCE roce:adaptive")
        for line in lines
    )
    assert figures["roce_fabric"] == BMV2.roce_class


def test_without_a_lossless_rate_retention_is_not_measured() -> None:
    runs = _loss_runs({"mrc@1%": {0: _loss_run(90.0, 0)}})
    figures = to_json(loss_figures.summarize(runs, BMV2))
    assert figures["retention"].startswith("not measured")
    assert figures["mrc_over_roce"].startswith("not measured")


def test_the_loss_figure_is_drawn_with_failed_points_marked(tmp_path: Path) -> None:
    failed = _loss_run(0.0, 3, error="retries exhausted")
    runs = _loss_runs(
        {
            "mrc@0%": {0: _loss_run(100.0, 0)},
            "roce:perftest@0%": {0: _loss_run(100.0, 1)},
            "mrc@5%": {0: _loss_run(60.0, 2)},
            "roce:perftest@5%": {0: failed},
        }
    )
    params = parse_params(
        EXPERIMENTS["loss"],
        {"rates_percent": "0,5", "transports": "mrc,roce", "roce_profiles": "perftest"},
    )
    assert loss_figures.draw(tmp_path, runs, {}, params) == ["loss.png"]
    assert (tmp_path / "loss.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    figures = to_json(loss_figures.summarize(runs, BMV2))
    assert figures["roce:perftest@5%"]["failures"][0]["error"] == "retries exhausted"


def test_a_run_left_uncut_because_every_transfer_had_failed_is_a_result_not_a_fault() -> None:
    failed = transfer(False, None, failure=Failure("retry counter exceeded"))
    done = transfer()
    assert uncut_reason(None, {"h1->h3": failed, "h2->h4": failed}) == (
        "every transfer had failed before the cut"
    )
    # a flow that lived on was not cut: the run is not the experiment it claims to be
    assert uncut_reason(None, {"h1->h3": failed, "h2->h4": done}) is None
    # the cut could not be chosen: a fault, whatever the transfers did
    assert uncut_reason("s1: counters unavailable", {"h1->h3": failed}) is None
    assert uncut_reason(None, {}) is None


@pytest.mark.parametrize(
    ("parse", "label"),
    [
        (FailoverMode.parse, "roce-converge:0.5-nic"),
        (LossMode.parse, "single@0.1%"),
        (CollectiveMode.parse, "mrc-cut-converge"),
    ],
)
def test_a_mode_is_read_back_from_its_label(parse: Any, label: str) -> None:
    assert str(parse(label)) == label


# -- contenders ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "options"),
    [
        ("mrc", {"transport": "mrc"}),
        (
            "roce:nccl",
            {"transport": "roce", "roce_profile": "nccl", "roce_qps": None, "roce_timeout": None},
        ),
        (
            "roce:nccl:16qp",
            {"transport": "roce", "roce_profile": "nccl", "roce_qps": 16, "roce_timeout": None},
        ),
        (
            "roce:perftest:t10",
            {"transport": "roce", "roce_profile": "perftest", "roce_qps": None, "roce_timeout": 10},
        ),
        (
            "roce",
            {
                "transport": "roce",
                "roce_profile": "perftest",
                "roce_qps": None,
                "roce_timeout": None,
            },
        ),
    ],
)
def test_a_contender_label_names_its_transfer_settings(label: str, options: dict[str, Any]) -> None:
    contender = transports.Contender.parse(label)
    assert str(contender) == label
    assert contender.transfer_options() == options


def test_a_bare_roce_stands_for_every_profile_asked_for() -> None:
    assert transports.parse_transports("mrc,roce", "adaptive,nccl") == (
        "mrc",
        "roce:adaptive",
        "roce:nccl",
    )
    assert transports.parse_transports("roce:perftest:t10,roce:perftest") == (
        "roce:perftest:t10",
        "roce:perftest",
    )
    with pytest.raises(ValueError, match=r"QPs must be in 1\.\.256"):
        transports.parse_transports("roce:nccl:0qp")
    with pytest.raises(ValueError, match=r"verbs timeout is 0\.\.31"):
        transports.parse_transports("roce:perftest:t40")
