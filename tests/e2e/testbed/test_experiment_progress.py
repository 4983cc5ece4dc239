"""``make experiment`` tells its runs as they go, on standard error, in plain lines when that is
no terminal (as in CI or through ``tee``): the plan first, each run's start and its end with
its goodput, the count done and the time left, the count at the end; standard output holds
the results directory and summary.txt alone, as before. A short ``loss`` run (two transports,
lossless and 1 %, 2 s each) on every target whose tools are present.

That the progress never changes summary.json, summary.txt or timeseries.json byte for byte is
checked on a fake network in ``tests/unit/experiments/test_runner_progress.py`` (two real runs
never measure the same goodput).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.testbed.experiment_run import run_experiment

pytestmark = [pytest.mark.mininet, pytest.mark.usefixtures("runs_dir")]

MODES = ("mrc@0%", "single@0%", "mrc@1%", "single@1%")
ENDED = re.compile(
    r"^loss \[(\d)/4\] (\S+) seed 0: done in [\d.]+ s, goodput ([\d.]+) Mbit/s; "
    r"(\d) of 4 done, (about|at least) .* left$"
)


def test_a_run_not_on_a_terminal_tells_each_run_in_plain_lines_on_standard_error(
    leaf_spine_file: Path, tmp_path: Path, testbed_target: str
) -> None:
    settings = {
        "rates_percent": "0,1",
        "transports": "mrc,single",
        "perftest_timeouts": "",
        "duration_s": "2",
    }
    proc, directory, _ = run_experiment(
        "loss", leaf_spine_file, tmp_path / "results", settings, testbed_target
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary_txt = (directory / "summary.txt").read_text()
    assert proc.stdout == f"results: {directory}\n{summary_txt}"
    assert "\x1b" not in proc.stderr  # no bar, no colour: plain lines
    told = [line for line in proc.stderr.splitlines() if line.startswith("loss")]
    assert told[0] == "loss: 4 runs in 1 bring-up(s); at least 8.0 s left"
    assert told[-1].startswith("loss: 4 of 4 runs done in ")
    runs = told[1:-1]
    assert [line for line in runs if line.endswith(": started")] == [
        f"loss [{index}/4] {mode} seed 0: started" for index, mode in enumerate(MODES, 1)
    ]
    ended = [match.groups() for line in runs if (match := ENDED.match(line))]
    assert [(place, mode, count) for place, mode, _, count, _ in ended] == [
        (str(index), mode, str(index)) for index, mode in enumerate(MODES, 1)
    ]
    # each run's figure is the goodput summary.txt gives its mode (one seed: the same run)
    for _, mode, goodput, _, _ in ended:
        assert f"{mode}: goodput {goodput} Mbit/s (1 seed)" in summary_txt, (mode, goodput)
