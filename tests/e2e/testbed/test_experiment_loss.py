"""``make experiment NAME=loss``, test-sized (lossless and 5 % on every fabric link, 3 s per
run), on every target whose tools are present.

Invariants only (goodputs, retention and MRC / RoCE are reported, never asserted): every
RoCE profile runs beside MRC and single path, and perftest's at each swept timeout; MRC
completes without losing a byte at every rate; a RoCE transfer completes losing nothing or
fails with its error recorded, a result; the loss rules saw every run's UDP 4791 frames and
dropped about the rate asked for (within six standard deviations of a binomial draw), and
none at 0 %; the controller saw no link go down (on bmv2 it discovers links with LLDP,
whose frames passed the rules); the results are complete and well-formed, with
retention measured against the lossless runs, MRC set against each RoCE contender and
against the strongest at each rate, and the fabric RoCE met named.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from experiments.transports import is_roce
from tests.e2e.testbed.experiment_run import run_experiment

pytestmark = [pytest.mark.mininet, pytest.mark.usefixtures("runs_dir")]


def test_loss_keeps_mrc_whole_and_drops_at_the_rate_but_never_lldp(
    leaf_spine_file: Path, tmp_path: Path, testbed_target: str
) -> None:
    roce = ("roce:perftest", "roce:nccl", "roce:adaptive", "roce:perftest:t10", "roce:perftest:t12")
    transports = ("mrc", "single", *roce)
    proc, directory, summary = run_experiment(
        "loss",
        leaf_spine_file,
        tmp_path / "results",
        {"rates_percent": "0,5", "duration_s": "3"},
        testbed_target,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary["pngs"] == ["loss.png"]
    assert summary["modes"] == [f"{t}@{r}%" for r in ("0", "5") for t in transports]
    for mode, runs in summary["runs"].items():
        run = runs["0"]
        (transfer,) = run["transfers"].values()
        if transfer["completed"]:
            assert transfer["bytes_lost"] == 0, (mode, transfer)
        else:
            assert is_roce(run["transport"]) and transfer["error"], (mode, transfer)
        seen, dropped = run["loss"]["frames_seen"], run["loss"]["frames_dropped"]
        assert seen > 0, mode
        rate = run["loss_rate_percent"] / 100
        assert abs(dropped - seen * rate) <= 6 * math.sqrt(seen * rate * (1 - rate)), run["loss"]
        if testbed_target == "bmv2":
            assert run["loss"]["lldp_frames_passed"] > 0, mode
    retention = summary["figures"]["retention"]
    assert retention["mrc"]["0"]["retention_mean"] == 1.0
    assert retention["mrc"]["5"]["retention_seeds"] == 1
    figures = summary["figures"]
    assert sorted(figures["mrc_over_roce"]) == sorted(roce)
    assert all(sorted(by_rate) == ["0", "5"] for by_rate in figures["mrc_over_roce"].values())
    for rate in ("0", "5"):
        strongest = figures["strongest_roce"][rate]
        assert strongest["strongest"] in roce, strongest
        assert sorted(name for name, _ in strongest["roce_values"]) == sorted(roce)
        values = [value for _, value in strongest["roce_values"] if value is not None]
        assert strongest["strongest_value"] == max(values), strongest
    assert figures["roce_fabric"], "the fabric RoCE met is named"
    (bring_up,) = summary["bring_ups"]
    events = (directory / bring_up["controller_events"]).read_text().splitlines()
    downs = [line for line in events if json.loads(line).get("event") == "link_down"]
    assert downs == [], downs  # no false cut: the loss never touched LLDP (or carrier)
