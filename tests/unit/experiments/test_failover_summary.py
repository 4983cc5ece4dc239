"""The failover summary judges RoCE by whether it died and by its stall: per mode its deaths,
and its runs the cut hit apart from those it missed; each seed's cut and whom it hit; per
routing policy and placement the strongest RoCE contender on each measure and MRC's ratio to
it; the goodput figure labels each line with its contender and whether its path was cut."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from experiments import plots
from experiments.capabilities import TargetFacts
from experiments.experiment import parse_params
from experiments.failover import figures
from experiments.failover.exposure import BYTES, FlowExposure
from experiments.failover.modes import FailoverMode
from experiments.failover.run import FailoverRun, FlowFailure
from experiments.json_form import to_json
from experiments.placements import CutChoice
from experiments.records import CutFailure, Run
from experiments.registry import EXPERIMENTS
from experiments.stats import spread_problems
from tests.unit.experiments.run_records import measured, transfer

BMV2 = TargetFacts("bmv2", trimming=True, ecn_marking=True, ecn_by="mrc.p4")
#: The cut each seed drew: the same in every mode.
CUTS = {0: "s4:2-l2", 1: "s2:2-l2", 2: "s1:2-l2"}


def _run(
    mode: str,
    seed: int,
    exposed: bool | None,
    recovery: float | None,
    stall: float,
    died_after: float | None = None,
) -> Run[FailoverRun]:
    """A run of one flow cut at 5 s: hit or missed, and dead ``died_after`` the cut."""
    flow = transfer()
    failed: tuple[FlowFailure, ...] = ()
    if died_after is not None:
        failure = CutFailure("retries exhausted", 5.0 + died_after, failed_after_cut_s=died_after)
        flow = transfer(completed=False, lost=None, goodput_bps=0.0, failure=failure)
        failed = (FlowFailure("h1->h3", failure.error, 5.0 + died_after, died_after),)
    share = None if exposed is None else 1.0 if exposed else 0.0
    record = FailoverRun(
        mode=FailoverMode.parse(mode),
        evs=256 if mode.startswith("mrc") else None,
        flows=("h1->h3",),
        transfers={"h1->h3": flow},
        cut=CUTS[seed],
        cut_link=CUTS[seed],
        cut_switch=None,
        cut_links=(CUTS[seed],),
        switch_dark=None,
        cut_probe_packets=None if exposed is None else 4000 if exposed else 0,
        cut_counters="members",
        cut_choice=CutChoice.RANDOM,
        exposure={"h1->h3": FlowExposure(exposed, share, None, BYTES, ("l2",))},
        exposed=exposed,
        cut_s=5.0,
        cut_error=None,
        uncut=None,
        restore_s=12.0,
        switch_back_s=None,
        recovery_s=recovery,
        longest_stall_s=stall,
        bytes_lost=flow.bytes_lost,
        completed=flow.completed,
        failed=failed,
        problems=(),
    )
    return measured(record, seed)


def _summary() -> tuple[figures.FailoverFigures, dict[str, Any]]:
    static = {
        # MRC: hit in seeds 0 and 2, back at once, never stalled long
        "mrc-static-remote": [(True, 0.05, 0.0), (True, 0.04, 0.0), (False, 0.02, 0.0)],
        # perftest: died 0.54 s after every cut on its path
        "roce:perftest-static-remote": [
            (True, None, 0.54, 0.55),
            (False, 0.03, 0.0),
            (True, None, 0.54, 0.55),
        ],
        # nccl: hit once, stalled until the restore and lived (8 x 4.3 s outlast the cut);
        # its exposure unknown once
        "roce:nccl-static-remote": [(True, 7.2, 6.9), (False, 0.03, 0.0), (None, 0.05, 0.0)],
    }
    runs = {
        FailoverMode.parse(mode): {seed: _run(mode, seed, *spec) for seed, spec in enumerate(specs)}
        for mode, specs in static.items()
    }
    summary = figures.summarize(runs, BMV2)
    return summary, to_json(summary)  # type: ignore[return-value]


def test_each_mode_counts_its_deaths_and_gives_its_hit_runs_apart_from_its_missed() -> None:
    _, summed = _summary()
    perftest = summed["roce:perftest-static-remote"]
    assert (perftest["died_seeds"], perftest["survival_share"]) == (2, pytest.approx(1 / 3))
    assert (perftest["exposed_seeds"], perftest["unexposed_seeds"]) == (2, 1)
    hit, missed = perftest["when_exposed"], perftest["when_unexposed"]
    assert (hit["seeds"], hit["died_seeds"], hit["failed_after_cut_s_mean"]) == (2, 2, 0.55)
    assert hit["recovery_s_seeds"] == 0 and hit["longest_stall_s_mean"] == 0.54
    assert hit["survived_longest_stall_s_seeds"] == 0  # a stall that ended in death
    assert (missed["seeds"], missed["died_seeds"], missed["recovery_s_mean"]) == (1, 0, 0.03)
    nccl = summed["roce:nccl-static-remote"]
    assert (nccl["exposure_unknown_seeds"], nccl["when_exposed"]["seeds"]) == (1, 1)
    assert spread_problems(summed) == []


def test_each_seed_names_its_cut_and_whose_traffic_it_hit() -> None:
    summary, summed = _summary()
    assert summed["cut_choice"] == "random"
    assert summed["cuts"][0] == {
        "seed": "0",
        "cut": {
            "mrc-static-remote": "s4:2-l2",
            "roce:perftest-static-remote": "s4:2-l2",
            "roce:nccl-static-remote": "s4:2-l2",
        },
        "exposed": {
            "mrc-static-remote": True,
            "roce:perftest-static-remote": True,
            "roce:nccl-static-remote": True,
        },
    }
    lines = figures.text(summary)
    assert (
        "seed 2: random cut s1:2-l2; path cut: mrc-static-remote no, "
        "roce:perftest-static-remote yes, roce:nccl-static-remote unknown"
    ) in lines
    assert (
        "roce:perftest-static-remote: died in 2 of 3 seed(s); the cut hit its traffic in 2, "
        "missed it in 1, unknown in 0; hit: died in 2 of 2 (0.55 s (0.55-0.55) over 2 seeds "
        "after the cut), longest stall 0.54 s (0.54-0.54) over 2 seeds (to the death where it "
        "died; - where it lived), back to 90 % - (no value in 2 seed(s)); missed: died in 0 "
        "of 1, longest stall 0.00 s (1 seed), back to 90 % 0.03 s (1 seed)"
    ) in lines


def test_roce_is_judged_by_its_strongest_contender_on_each_measure() -> None:
    summary, summed = _summary()
    judged = summed["against_strongest"]["static-remote"]
    survival = judged["survival_share"]
    assert (survival["strongest"], survival["strongest_value"]) == ("roce:nccl", 1.0)
    assert survival["mrc_over_strongest"] == 1.0
    assert survival["roce_values"] == [["roce:nccl", 1.0], ["roce:perftest", pytest.approx(1 / 3)]]
    # perftest's stalls ended in its deaths: the stall is judged over runs a contender lived
    stall = judged["longest_stall_exposed_survived_s"]
    assert (stall["strongest"], stall["better"], stall["strongest_value"]) == (
        "roce:nccl",
        "lower",
        6.9,
    )
    assert stall["mrc_value"] == 0.0 and stall["mrc_over_strongest"] == 0.0
    assert stall["roce_values"] == [["roce:nccl", 6.9], ["roce:perftest", None]]
    recovery = judged["recovery_exposed_s"]  # perftest never recovered: nccl is the strongest
    assert (recovery["strongest"], recovery["mrc_over_strongest"]) == (
        "roce:nccl",
        pytest.approx(0.045 / 7.2),
    )
    lines = figures.text(summary)
    at = lines.index("strongest RoCE, static routing, remote cut:")
    assert lines[at + 1] == (
        "  survival_share (higher is better): strongest RoCE roce:nccl 1, mrc 1, "
        "mrc / strongest 1.00 (others: roce:perftest 0.333)"
    )
    assert lines[at + 2] == (
        "  longest_stall_exposed_survived_s (lower is better): strongest RoCE roce:nccl 6.9 s, "
        "mrc 0 s, mrc / strongest 0.00 (others: roce:perftest -)"
    )
    assert lines[at + 3].startswith(
        "  recovery_exposed_s (lower is better): strongest RoCE roce:nccl 7.2 s"
    )


def test_without_a_roce_contender_nothing_is_held_against_roce() -> None:
    runs = {
        FailoverMode.parse("mrc-static-remote"): {0: _run("mrc-static-remote", 0, True, 0.1, 0)}
    }
    summary = figures.summarize(runs, BMV2)
    assert to_json(summary)["against_strongest"] == {}  # type: ignore[index]
    assert not any(line.startswith("strongest RoCE") for line in figures.text(summary))


def test_each_line_of_the_goodput_figure_is_a_contender_and_whether_its_path_was_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[tuple[str, list[str]]] = []

    def goodput_over_time(path: Path, title: str, lines: dict[str, Any], markers: Any) -> None:
        del path, markers
        drawn.append((title, list(lines)))

    monkeypatch.setattr(plots, "goodput_over_time", goodput_over_time)
    modes = {"mrc-static-remote": True, "roce:perftest-static-remote": False}
    runs = {
        FailoverMode.parse(mode): {0: _run(mode, 0, exposed, 0.1, 0.0)}
        for mode, exposed in modes.items()
    }
    series = {mode: {0: {"h1->h3": []}} for mode in runs}
    params = parse_params(EXPERIMENTS["failover"], {"routings": "static"})
    assert figures.draw(tmp_path, runs, series, params) == ["goodput.png"]
    ((title, labels),) = drawn
    assert title.startswith("failover (static routing, random remote cut s4:2-l2): h1 -> h3")
    assert labels == ["mrc (256 EVs, path cut)", "roce:perftest (path not cut)"]


def test_a_runs_progress_figure_is_its_time_back_to_90_percent_as_the_summary_writes_it():
    recovered = _run("mrc-static-remote", 0, exposed=True, recovery=0.4, stall=0.3).record
    assert figures.headline(recovered) == (
        "back to 90 % 0.40 s after the cut, goodput 8.000 Mbit/s"
    )
    never = _run("single-static-remote", 1, exposed=True, recovery=None, stall=2.0).record
    assert figures.headline(never).startswith("never back to 90 % after the cut, ")
    died = _run(
        "roce:nccl-static-remote", 2, exposed=True, recovery=None, stall=9.0, died_after=4.3
    )
    assert figures.headline(died.record).endswith(
        "goodput 0.000 Mbit/s, FAILED 1 of 1: retries exhausted"
    )
    uncut = dataclasses.replace(died.record, cut_s=None, uncut="every transfer had failed")
    assert figures.headline(uncut).startswith("nothing cut (every transfer had failed), ")
    assert EXPERIMENTS["failover"].headline is EXPERIMENTS["reboot"].headline is figures.headline
