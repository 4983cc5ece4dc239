"""The controller experiment's knobs and figures: a kill must come before the cut, within the
transfer; per transport the takeover's time and writes, the cut's time to its last write, the
transfers completed and the bytes lost, with their spread over seeds."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from experiments.controller_failure import modes_of
from experiments.controller_failure.figures import summarize, text
from experiments.controller_failure.run import ControllerParams, ControllerRunRecord
from experiments.records import Transfer
from experiments.registry import EXPERIMENTS


@dataclass(frozen=True)
class _Run:
    record: ControllerRunRecord


def _record(takeover_s: float, writes: int, cut_s: float | None, lost: int = 0) -> _Run:
    transfer = Transfer(1000, 1000 - lost, lost, True, 8e6, {})
    return _Run(
        ControllerRunRecord(
            transport="mrc",
            transfers={"h1->h3": transfer},
            killed="primary",
            took_over="backup",
            takeover_s=takeover_s,
            takeover_writes=writes,
            cut_link="l2:1<->s1:2",
            cut_to_write_s=cut_s,
            cut_writes=4,
            rejoined_as="backup",
            problems=(),
        )
    )


def test_the_experiment_is_registered_runs_a_backup_and_compares_three_transports() -> None:
    experiment = EXPERIMENTS["controller"]
    assert experiment.backup, "every bring-up needs the second controller"
    assert modes_of(ControllerParams()) == ("mrc", "single", "roce:perftest")


@pytest.mark.parametrize(
    ("kill_at_s", "cut_at_s", "duration_s"), [(0.0, 5.0, 12.0), (6.0, 5.0, 12.0), (3.0, 13, 12)]
)
def test_the_kill_comes_before_the_cut_and_both_within_the_transfer(
    kill_at_s: float, cut_at_s: float, duration_s: float
) -> None:
    params = ControllerParams(kill_at_s=kill_at_s, cut_at_s=cut_at_s, duration_s=duration_s)
    with pytest.raises(ValueError, match="kill_at_s < cut_at_s < duration_s"):
        params.check()


def test_figures_give_each_measure_with_its_spread_over_seeds() -> None:
    runs = {
        "mrc": {0: _record(0.02, 0, 0.05), 1: _record(0.04, 0, 0.07), 2: _record(0.03, 0, None)}
    }
    figures = summarize(runs, None)  # type: ignore[arg-type]
    mrc = figures.transports["mrc"]
    assert (mrc.runs, mrc.completed, mrc.bytes_lost) == (3, 3, 0)
    assert mrc.takeover.mean == pytest.approx(0.03) and mrc.takeover.seeds == 3
    assert (mrc.takeover_writes, mrc.takeover_writes_max) == (0, 0)
    assert mrc.cut_to_write.seeds == 2, "a run without a reroute record gives no value"
    (line,) = text(figures)
    assert line.startswith("mrc: takeover 0.03 s (0.02-0.04) over 3 seeds, 0 writes on takeover")
    assert "cut to last write 0.06 s (0.05-0.07) over 2 seeds of 3" in line
    assert line.endswith("3/3 completed, 0 bytes lost")
