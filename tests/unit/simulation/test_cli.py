"""``python -m simulation permutation``: JSON on stdout with the flows, the fabric's counters
and the run's cost; exit 0 only when every flow completed exact; a bad argument is exit 2 with
a one-line reason."""

from __future__ import annotations

import json

import pytest

from simulation.__main__ import main


def test_a_permutation_reports_its_flows_counters_and_cost(capsys):
    code = main(["permutation", "leaf-spine", "--bytes", "64K", "--cut", "l1", "s2"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["hosts"] == report["flows"] == report["completed"] == report["exact"] == 4
    assert report["cut"] == "l1:4<->s2:1" and report["routing"] == "reactive"
    assert 0 < report["completion_ms"]["median"] <= report["completion_ms"]["max"]
    assert report["finished_ms"] == report["completion_ms"]["max"]
    assert report["fabric"]["events"] == report["cost"]["events"] > 0
    assert report["cost"]["events_per_cpu_s"] > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--cut", "l1", "l2"], "no link between l1 and l2"),
        (["--roce-profile", "nccl"], "add --transport roce"),
        (["--transport", "roce", "--qps", "0"], "--qps must be in 1-"),
        (["--routing", "sometimes"], "routing must be static, reactive"),
    ],
)
def test_a_bad_argument_is_refused_with_its_reason(capsys, argv, message):
    assert main(["permutation", "leaf-spine", *argv]) == 2
    assert message in capsys.readouterr().err


def test_an_unknown_topology_is_refused(capsys):
    assert main(["permutation", "no-such-fabric"]) == 2
    assert "no-such-fabric" in capsys.readouterr().err


def test_a_roce_permutation_names_its_profile_and_qps(capsys):
    code = main(
        [
            "permutation",
            "leaf-spine",
            "--bytes",
            "64K",
            "--transport",
            "roce",
            "--roce-profile",
            "nccl",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["exact"] == 4
    assert (report["transport"], report["roce_profile"], report["qps"]) == ("roce", "nccl", 2)


def test_a_collective_reports_its_bus_bandwidth_and_exactness(capsys):
    code = main(["collective", "leaf-spine", "--size", "64K", "--collective", "allgather"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (report["collective"], report["ranks"], report["wrong_ranks"]) == ("allgather", 4, 0)
    assert report["busbw_mb_s"] == pytest.approx(report["algbw_mb_s"] * 3 / 4, rel=1e-3)


def test_a_collective_size_the_ranks_cannot_share_is_refused(capsys):
    assert main(["collective", "leaf-spine", "--size", "1001"]) == 2
    assert "simulation:" in capsys.readouterr().err
