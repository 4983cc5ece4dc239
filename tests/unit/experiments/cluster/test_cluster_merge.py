"""A sweep's seeds measured apart, each as a cluster's task measures it (its own bring-ups,
its runs numbered from its place in the whole order), and merged, give the runs, time series
and summary a local run of the same seeds gives: the same runs per mode and seed, the same
sequence numbers, the same summary.json keys with the cluster's account beside them. The
network and the runs are fakes (those of ``test_runner_progress``), so that both make the same
runs."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from experiments import runner
from experiments.capabilities import TargetFacts
from experiments.cluster.job import Place, SeedResult
from experiments.cluster.merge import merge
from experiments.plan import plan_bring_ups, plan_seed
from experiments.progress import track
from experiments.records import Run
from experiments.summary import ClusterAccount, Rerun, SeedPlace
from tests.unit.experiments.run_records import measured
from tests.unit.experiments.test_runner_progress import EXPERIMENT, FakeTestbed, Params

FACTS = TargetFacts("linux", trimming=False, ecn_marking=None, ecn_by=None)
SEEDS = 3


def fake_measured_run(
    experiment: Any, testbed: FakeTestbed, params: Params, mode: str, seed: int, sequence: int
) -> tuple[Run[Any], dict[str, Any]]:
    record, series = experiment.run_mode(testbed, params, mode, seed)
    return measured(record, sequence=sequence), series


@pytest.fixture(autouse=True)
def fake_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(runner, "Testbed", FakeTestbed)
    monkeypatch.setattr(runner, "measured_run", fake_measured_run)
    monkeypatch.setattr(runner, "versions", lambda: {"project_commit": "abc", "agent_build": "x"})
    monkeypatch.delenv("LIVE", raising=False)
    yield


def _local(root: Path) -> tuple[runner.Prepared[str], runner.Measured[str, Any, Any]]:
    params = Params()
    prepared = runner.prepare(EXPERIMENT, None, SEEDS, params, root)
    with track(None, "fake", prepared.steps) as told:
        local = runner.measure(
            EXPERIMENT,
            plan_bring_ups(EXPERIMENT, params, SEEDS),
            prepared.files,
            prepared.variants,
            "linux",
            params,
            prepared.directory,
            None,
            told,
        )
    return prepared, local


def _seed_results(prepared: runner.Prepared[str]) -> list[SeedResult[str, Any, Any]]:
    """Each seed as a task measures it, with a controller event log per bring-up, given
    back in the order the tasks end (the last seed first)."""
    params = Params()
    results = []
    for seed in reversed(range(SEEDS)):
        with track(None, "fake", prepared.steps) as told:
            alone = runner.measure(
                EXPERIMENT,
                plan_seed(EXPERIMENT, params, seed),
                prepared.files,
                prepared.variants,
                "linux",
                params,
                prepared.directory,
                None,
                told,
                first_sequence=seed * 2,
            )
        logged = tuple(
            dataclasses.replace(account, controller_events="controller-events.jsonl")
            for account in alone.bring_ups
        )
        results.append(
            SeedResult(
                seed=seed,
                place=Place(f"machine-{seed}", f"tcp://10.0.0.{seed}:4000"),
                facts=FACTS,
                versions={"project_commit": "abc"},
                measured=dataclasses.replace(alone, bring_ups=logged),
                event_logs={"controller-events.jsonl": f"seed {seed}'s controller\n"},
            )
        )
    return results


def test_merged_seeds_hold_the_runs_and_series_of_a_local_run_of_the_same_seeds(
    tmp_path: Path,
) -> None:
    prepared, local = _local(tmp_path / "local")
    merged = merge(EXPERIMENT, Params(), _seed_results(prepared), tmp_path)
    assert merged.runs == local.runs
    assert merged.series == local.series
    assert [list(seeds) for seeds in merged.runs.values()] == [[0, 1, 2], [0, 1, 2]]
    # one bring-up per seed where the local run shares one: the same runs, in the same order
    assert [run for b in merged.bring_ups for run in b.runs] == list(local.bring_ups[0].runs)


def test_each_seeds_controller_log_is_kept_under_the_name_a_local_run_gives_a_bring_up(
    tmp_path: Path,
) -> None:
    prepared, _ = _local(tmp_path / "local")
    merged = merge(EXPERIMENT, Params(), _seed_results(prepared), tmp_path)
    names = [bring_up.controller_events for bring_up in merged.bring_ups]
    assert names == [
        "controller-events-1.jsonl",
        "controller-events-2.jsonl",
        "controller-events-3.jsonl",
    ]
    for seed, name in enumerate(names):
        assert (tmp_path / str(name)).read_text() == f"seed {seed}'s controller\n"


def test_a_clusters_summary_has_a_local_runs_form_with_the_cluster_beside_it(
    tmp_path: Path,
) -> None:
    prepared, local = _local(tmp_path / "local")
    local_dir = runner.write_results(EXPERIMENT, prepared, "linux", Params(), FACTS, local)
    clustered, _ = _local(tmp_path / "cluster")
    account = ClusterAccount(
        scheduler="tcp://10.0.0.9:8786",
        seeds={
            seed: SeedPlace(f"machine-{seed}", f"tcp://10.0.0.{seed}:4000", 1, {})
            for seed in range(SEEDS)
        },
        reruns=(Rerun(1, "tcp://10.0.0.7:4000", "machine-7", 1, "machine-7 was lost"),),
        task_start_s={0: 0.02, 1: 0.03, 2: 0.02},
        result_bytes={0: 30000, 1: 30000, 2: 30000},
        result_transfer_s={0: 0.01, 1: 0.01, 2: 0.01},
    )
    merged = merge(EXPERIMENT, Params(), _seed_results(clustered), clustered.directory)
    cluster_dir = runner.write_results(
        EXPERIMENT, clustered, "linux", Params(), FACTS, merged, account
    )
    here = json.loads((local_dir / "summary.json").read_text())
    there = json.loads((cluster_dir / "summary.json").read_text())
    assert list(there) == [*here, "cluster"]
    for key in ("runs", "figures", "order", "bottleneck", "invariants", "modes", "seeds"):
        assert there[key] == here[key], key
    assert there["cluster"]["seeds"]["1"]["machine"] == "machine-1"
    assert there["cluster"]["reruns"][0]["why"] == "machine-7 was lost"
    text = (cluster_dir / "summary.txt").read_text()
    assert "cluster tcp://10.0.0.9:8786: seed 0 on machine-0, seed 1 on machine-1, " in text
    assert "seed 1 rerun: machine-7 was lost" in text
    # the rest of summary.txt as the local run's, but for the bring-ups (one per seed)
    order = ("order: ", "cluster ", "seed 1 rerun: ")
    local_text = (local_dir / "summary.txt").read_text()
    assert [line for line in text.splitlines() if not line.startswith(order)] == [
        line for line in local_text.splitlines() if not line.startswith(order)
    ]
    assert "(3 bring-up(s))" in text and "(1 bring-up(s))" in local_text
