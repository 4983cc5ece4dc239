"""``make experiment NAME=failover``, test-sized, on every target whose tools are present.

Invariants only (the comparisons between transports are reported, never asserted): every MRC
transfer, on many EVs or one, completes without losing a byte through the cut and the
restore; a RoCE transfer either completes losing nothing or fails with its error and the
time it failed recorded, a result and not an error (exit status 0 either way); the results
directory is complete and well-formed, each run records its routing policy, its placement,
how the cut was chosen (drawn with the seed by default) and what was broken, read from the
counters the target has (member counters on bmv2, port tx counters on linux, the source
host's own NIC counters for ``nic``), whose traffic the cut hit (a sprayed MRC flow is never
missed), its longest stall and its recovery with their spread. The placements: ``remote``
(the headline, with every contender under static routing), ``local`` and ``switch`` (a spine
loses power: on bmv2 its process is killed and started again, and the controller reprograms
it), and ``nic`` on ``two-plane``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from experiments.failover.modes import FailoverMode
from experiments.transports import is_roce
from tests.e2e.testbed.experiment_run import FORWARDED_COUNTERS, run_experiment
from tests.e2e.testbed.topology_files import preset_on_own_ports

pytestmark = [pytest.mark.mininet, pytest.mark.usefixtures("runs_dir")]

#: Test-sized timing: 5 s flows, cut at 2 s, restored at 3.5 s.
TIMING = {"duration_s": "5", "cut_at_s": "2", "restore_at_s": "3.5"}


def _check_run(summary: dict[str, Any], mode: str, target: str) -> dict[str, Any]:
    """What every run must hold; returns the run."""
    run = summary["runs"][mode]["0"]
    parsed = FailoverMode.parse(mode)
    transport, routing, placement = parsed.transport, str(parsed.routing), parsed.placement
    assert (run["transport"], run["routing"], run["placement"]) == (transport, routing, placement)
    for name, transfer in run["transfers"].items():
        if transfer["completed"]:
            assert transfer["bytes_lost"] == 0, (mode, name, transfer)
            assert transfer["bytes_delivered"] == transfer["bytes_sent"] > 0
        else:
            assert is_roce(transport), (mode, name, transfer)  # only RoCE may fail
            assert transfer["error"] and transfer["failed_at_s"] > 0, transfer
        assert transfer["longest_stall_s"] >= 0
    assert run["problems"] == [], run
    if run["cut"] is None:
        # every RoCE transfer ran out of retries before the cut (a loaded fabric): a result
        assert is_roce(transport) and not run["completed"], run
        assert run["uncut"] == "every transfer had failed before the cut", run
        return run
    assert run["cut_s"] < run["restore_s"]
    if placement != "nic":
        assert run["cut_counters"] == FORWARDED_COUNTERS[target]
    assert sorted(run["exposure"]) == sorted(run["transfers"]), run
    if run["cut_choice"] == "busiest":
        assert run["cut_probe_packets"] > 0, run  # the flows were seen where the fabric broke
    if transport == "mrc":
        assert run["exposed"] is not False, run  # 256 EVs spray over every path
    figure = summary["figures"][mode]
    assert figure["routing"] == routing and figure["placement"] == placement
    assert figure["longest_stall_s"] == [run["longest_stall_s"]]
    assert figure["recovery_s_stdev"] is None  # one seed has no spread, and says so
    return run


def test_failover_headline_static_remote_all_transports(
    leaf_spine_file: Path, tmp_path: Path, testbed_target: str
) -> None:
    settings = {**TIMING, "routings": "static"}
    proc, directory, summary = run_experiment(
        "failover", leaf_spine_file, tmp_path / "results", settings, testbed_target
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    contenders = ["mrc", "single", "roce:perftest", "roce:nccl", "roce:adaptive"]
    modes = [f"{contender}-static-remote" for contender in contenders]
    assert summary["modes"] == modes
    assert summary["pngs"] == ["goodput.png"]
    assert [b["routing"] for b in summary["bring_ups"]] == ["static"]
    series = json.loads((directory / "timeseries.json").read_text())
    for mode in modes:
        run = _check_run(summary, mode, testbed_target)
        # remote: a spine's downlink into the destination's leaf, not the source leaf's uplink
        if run["cut"] is not None:
            assert run["cut_link"].startswith("s") and run["cut_link"].endswith("-l2"), run
        (points,) = series[mode]["0"].values()
        if run["completed"]:
            assert len(points) >= 10, f"{mode}: too few 100 ms bins: {points}"
    # one draw for the seed: every contender met the same cut
    assert len({summary["runs"][mode]["0"]["cut"] for mode in modes} - {None}) <= 1
    assert set(summary["figures"]["against_strongest"]) == {"static-remote"}
    assert summary["invariants"]["strict_modes"] == modes[:2]
    pair = summary["figures"]["pairs"][0]
    assert pair["order"] == modes and sorted(pair["longest_stall_s"]) == sorted(modes)
    assert "invariants: bytes lost 0, every transfer completed: yes" in proc.stdout


def test_failover_local_and_switch_placements(
    leaf_spine_file: Path, tmp_path: Path, testbed_target: str
) -> None:
    settings = {
        **TIMING,
        "transports": "mrc,single",
        "routings": "reactive",
        "placements": "local,switch",
    }
    proc, _, summary = run_experiment(
        "failover", leaf_spine_file, tmp_path / "results", settings, testbed_target
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary["pngs"] == ["goodput-reactive-local.png", "goodput-reactive-switch.png"]
    for transport in ("mrc", "single"):
        local = _check_run(summary, f"{transport}-reactive-local", testbed_target)
        assert local["cut_link"].startswith("l1:") and local["cut_switch"] is None
        switch = _check_run(summary, f"{transport}-reactive-switch", testbed_target)
        # a spine went dark: both its links were cut, then lit again
        assert switch["cut_switch"].startswith("s") and len(switch["cut_links"]) == 2
        assert switch["switch_dark"] is True
        if testbed_target == "bmv2":
            assert switch["switch_back_s"] > 0  # restarted and reprogrammed
        else:
            assert switch["switch_back_s"] is None  # no process to restart
    assert summary["invariants"]["held"]


def test_failover_nic_cuts_the_source_hosts_busiest_nic(
    tmp_path: Path, testbed_target: str
) -> None:
    two_plane = preset_on_own_ports("two-plane", tmp_path, grpc_base=50850, thrift_base=9890)
    settings = {**TIMING, "transports": "mrc", "routings": "reactive", "placements": "nic"}
    proc, _, summary = run_experiment(
        "failover", two_plane, tmp_path / "results", settings, testbed_target
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = _check_run(summary, "mrc-reactive-nic", testbed_target)
    assert run["cut_counters"] == "host_nic_tx"
    assert run["cut_link"] in ("h1:0-p0l1", "h1:1-p1l1"), run
