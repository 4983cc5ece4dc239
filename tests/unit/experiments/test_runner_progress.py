"""The runner tells its bring-ups and runs as they go, and that never changes what it writes:
the same runs give byte-for-byte the same summary.json, summary.txt and timeseries.json with
progress shown (plain lines, ``-v``'s events, or the live bar) as without it, and standard
output stays empty. The network, the target's facts and the measured runs are fakes here,
so that two runs of the runner give the same runs; ``tests/e2e/testbed`` drives a real one."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from experiments import runner
from experiments.capabilities import TargetFacts
from experiments.experiment import Experiment
from experiments.headlines import transfers_headline
from experiments.progress import Display, event
from experiments.records import Run, Runs, Transfer
from experiments.topology_variant import Variant
from tests.unit.experiments.run_records import Transfers, measured, transfer


@dataclass(frozen=True)
class Params:
    duration_s: float = 2.0

    def check(self) -> None:
        pass


def _run_mode(testbed: object, params: Params, mode: str, seed: int) -> tuple[Transfers, dict]:
    del testbed
    event("%s seed %d: the link between s1 and l1 cut", mode, seed)
    goodput = 1e6 * (seed + 1) * (2 if mode == "mrc" else 1)
    record = Transfers({"h1->h3": transfer(goodput_bps=goodput)})
    return record, {"goodput_bps": [goodput, params.duration_s]}


def _summarize(runs: Runs[str, Transfers], facts: TargetFacts) -> dict[str, float]:
    del facts
    return {
        f"{mode}/{seed}": run.transfers["h1->h3"].goodput_bps
        for mode, seeds in runs.items()
        for seed, run in seeds.items()
    }


def _text(figures: Mapping[str, float]) -> list[str]:
    return [f"{key}: {value:.0f} bit/s" for key, value in figures.items()]


EXPERIMENT: Experiment[Params, str, Transfers, dict, dict[str, float]] = Experiment(
    name="fake",
    default_topology="leaf-spine",
    params_type=Params,
    modes_of=lambda params: ("mrc", "single"),
    variant=lambda params, mode: Variant(),
    run_mode=_run_mode,
    summarize=_summarize,
    draw=lambda directory, runs, series, params: [],
    text=_text,
    headline=transfers_headline,
    planned_s=lambda params, mode: params.duration_s,
)


class FakeTestbed:
    """A network that is up at once, with no controller, and leaves nothing behind."""

    controller = None
    leftovers = "nothing left"

    @classmethod
    @contextlib.contextmanager
    def open(cls, *args: Any) -> Iterator[FakeTestbed]:
        del args
        yield cls()


def _measured_run(
    experiment: Experiment[Params, str, Transfers, dict, Any],
    testbed: FakeTestbed,
    params: Params,
    mode: str,
    seed: int,
    sequence: int,
) -> tuple[Run[Transfers], dict]:
    record, series = experiment.run_mode(testbed, params, mode, seed)
    return measured(record, sequence=sequence), series


@pytest.fixture
def fake_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "Testbed", FakeTestbed)
    monkeypatch.setattr(runner, "measured_run", _measured_run)
    monkeypatch.setattr(
        runner,
        "probe_target_facts",
        lambda target: TargetFacts(target, trimming=True, ecn_marking=True, ecn_by="RED"),
    )
    monkeypatch.setattr(runner, "versions", lambda: {"project_commit": "abc", "agent_build": "x"})
    monkeypatch.delenv("LIVE", raising=False)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


#: A run's end: its place and label, its figure, the count done.
RUN_ENDED = re.compile(r"^(fake \[\d/4\] \w+ seed \d): done in [\d.]+ s, (.*); (\d) of 4 done, ")
RESULT_FILES = ("summary.json", "summary.txt", "timeseries.json")


def _results(root: Path, progress: Display | None) -> dict[str, bytes]:
    directory = runner.run_experiment(
        EXPERIMENT,
        topology_ref=None,
        target="linux",
        seeds=2,
        params=Params(),
        results_root=root,
        progress=progress,
    )
    return {name: (directory / name).read_bytes() for name in RESULT_FILES}


@pytest.mark.usefixtures("fake_network")
@pytest.mark.parametrize("shown", ["plain", "verbose", "live"])
def test_the_results_are_byte_for_byte_the_same_with_progress_as_without(
    tmp_path: Path, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = Terminal() if shown == "live" else io.StringIO()
    display = Display(stream=stream, verbose=shown == "verbose", tick_s=None)
    without = _results(tmp_path / "without", None)
    with_progress = _results(tmp_path / "with", display)
    assert with_progress == without
    assert "fake [4/4] mrc seed 1: done in " in stream.getvalue()
    assert capsys.readouterr().out == ""


@pytest.mark.usefixtures("fake_network")
def test_the_runner_tells_each_run_in_the_order_they_ran_with_its_figure(tmp_path: Path) -> None:
    out = io.StringIO()
    _results(tmp_path, Display(stream=out, verbose=True, live=False, tick_s=None))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("fake: 4 runs in 1 bring-up(s); at least 8.0 s left")
    ended = [match.groups() for line in lines if (match := RUN_ENDED.match(line))]
    assert ended == [
        ("fake [1/4] mrc seed 0", "goodput 2.000 Mbit/s", "1"),
        ("fake [2/4] single seed 0", "goodput 1.000 Mbit/s", "2"),
        ("fake [3/4] single seed 1", "goodput 2.000 Mbit/s", "3"),
        ("fake [4/4] mrc seed 1", "goodput 4.000 Mbit/s", "4"),
    ]
    assert "fake: bring-up 1 of 1: topology.yaml on linux" in lines
    assert any(
        line.startswith("fake [3/4] single seed 1 +") and line.endswith("cut") for line in lines
    )
    assert "fake: torn down: nothing left" in lines
    assert lines[-1].startswith("fake: 4 of 4 runs done in ")


def test_a_transfer_that_failed_is_the_runs_figure() -> None:
    failed = Transfer(
        bytes_sent=None,
        bytes_delivered=0,
        bytes_lost=None,
        completed=False,
        goodput_bps=0.0,
        retransmits={},
        failure=None,
    )
    record = Transfers({"h1->h3": transfer(goodput_bps=3e6), "h2->h4": failed})
    assert transfers_headline(record) == ("goodput 3.000 Mbit/s, FAILED 1 of 2: did not complete")
