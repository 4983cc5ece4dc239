"""A sweep through a real Dask cluster, in this process (two workers of one thread and one
``fabric`` each), on the fake network of ``test_runner_progress``: every seed comes back and
is written as a local run writes it, with the machine of each seed; a run that raises on a
worker comes back as that seed's failure and stops the sweep naming it and the machine, never
retried; a worker whose tree is not the client's refuses its seed naming both trees."""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from distributed import LocalCluster

from experiments import registry, runner
from experiments.capabilities import TargetFacts
from experiments.cluster import fanout, task
from experiments.progress import Display
from experiments.summary import Summary
from tests.unit.experiments.cluster.test_cluster_merge import fake_measured_run
from tests.unit.experiments.test_runner_progress import EXPERIMENT, FakeTestbed, Params

FACTS = TargetFacts("linux", trimming=False, ecn_marking=None, ecn_by=None)


#: Each start of seed 1's failing run, by mode (the workers are threads of this process).
FAILING_STARTS: list[str] = []


def _failing_run_mode(testbed: object, params: Params, mode: str, seed: int) -> Any:
    if seed == 1:
        FAILING_STARTS.append(mode)
        raise RuntimeError("the agents never came up")
    return EXPERIMENT.run_mode(testbed, params, mode, seed)


FAILING = dataclasses.replace(EXPERIMENT, name="failing", run_mode=_failing_run_mode)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Two in-process workers on the fake network; the scheduler's address."""
    monkeypatch.setattr(runner, "Testbed", FakeTestbed)
    monkeypatch.setattr(runner, "measured_run", fake_measured_run)
    monkeypatch.setattr(runner, "versions", lambda: {"project_commit": "abc", "agent_build": "x"})
    monkeypatch.setattr(task, "versions", lambda: {"project_commit": "abc"})
    monkeypatch.setattr(task, "probe_target_facts", lambda target: FACTS)
    monkeypatch.setattr(runner, "probe_target_facts", lambda target: FACTS)
    monkeypatch.setitem(registry.EXPERIMENTS, "fake", EXPERIMENT)
    monkeypatch.setitem(registry.EXPERIMENTS, "failing", FAILING)
    monkeypatch.delenv("LIVE", raising=False)
    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=False,
        resources={"fabric": 1},
        dashboard_address=None,
    ) as local:
        yield local.scheduler_address


def _sweep(experiment: Any, address: str, root: Path, stream: io.StringIO) -> Path:
    return fanout.run_on_cluster(
        experiment,
        address=address,
        topology_ref=None,
        target="linux",
        seeds=3,
        params=Params(),
        results_root=root,
        progress=Display(stream=stream, tick_s=None),
    )


def test_every_seed_comes_back_and_is_written_as_a_local_run_with_its_machine(
    cluster: str, tmp_path: Path
) -> None:
    stream = io.StringIO()
    directory = _sweep(EXPERIMENT, cluster, tmp_path, stream)
    summary = json.loads((directory / "summary.json").read_text())
    assert list(summary) == [field.name for field in dataclasses.fields(Summary)]
    assert sorted(summary["runs"]["mrc"]) == ["0", "1", "2"]
    sequences = sorted(
        run["sequence"] for runs in summary["runs"].values() for run in runs.values()
    )
    assert sequences == list(range(6))
    account = summary["cluster"]
    assert account["scheduler"] == cluster and account["reruns"] == []
    assert {place["attempts"] for place in account["seeds"].values()} == {1}
    assert {place["machine"] for place in account["seeds"].values()} <= {"0", "1"}
    assert all(size > 0 for size in account["result_bytes"].values())
    lines = stream.getvalue().splitlines()
    assert lines[0] == f"fake: 6 runs of 3 seeds on cluster {cluster}, 2 workers"
    assert len([line for line in lines if line.endswith(": started")]) == 6
    assert lines[-1].startswith("fake: 6 of 6 runs done in ")


def test_a_run_that_raises_is_its_seeds_failure_named_with_its_machine_not_retried(
    cluster: str, tmp_path: Path
) -> None:
    FAILING_STARTS.clear()
    with pytest.raises(fanout.ClusterRunFailed, match=r"^seed 1 failed on \d:\n") as failed:
        _sweep(FAILING, cluster, tmp_path, io.StringIO())
    assert "RuntimeError: the agents never came up" in str(failed.value)
    assert len(FAILING_STARTS) == 1  # its first run raised, and it never ran again


def test_a_worker_at_another_tree_refuses_its_seed_naming_both(
    cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(task, "loaded_tree", lambda: "1111111")
    monkeypatch.setattr(task, "tree_identity", lambda: "1111111")
    monkeypatch.setattr(fanout, "tree_identity", lambda: "2222222")
    with pytest.raises(fanout.ClusterRunFailed) as refused:
        _sweep(EXPERIMENT, cluster, tmp_path, io.StringIO())
    assert "its tree is at 1111111, the client's at 2222222;" in str(refused.value)


def test_a_worker_refuses_before_unpickling_a_job_it_could_not_load(
    cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At another commit a class the job holds may have moved: the worker refuses naming
    both trees rather than failing to unpickle."""
    monkeypatch.setattr(task, "loaded_tree", lambda: "1111111")
    monkeypatch.setattr(fanout, "tree_identity", lambda: "2222222")

    def unloadable(data: bytes) -> object:
        raise AttributeError("Can't get attribute 'Params' on <module 'experiments.loss'>")

    monkeypatch.setattr(task, "_load_job", unloadable)
    with pytest.raises(fanout.ClusterRunFailed) as refused:
        _sweep(EXPERIMENT, cluster, tmp_path, io.StringIO())
    assert "its tree is at 1111111, the client's at 2222222;" in str(refused.value)


def test_a_worker_whose_tree_changed_since_it_started_refuses_its_seed(
    cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(task, "loaded_tree", lambda: "2222222")
    monkeypatch.setattr(task, "tree_identity", lambda: "3333333")
    monkeypatch.setattr(fanout, "tree_identity", lambda: "2222222")
    with pytest.raises(fanout.ClusterRunFailed) as refused:
        _sweep(EXPERIMENT, cluster, tmp_path, io.StringIO())
    assert "its tree is at 3333333 (it started at 2222222), the client's at 2222222;" in str(
        refused.value
    )


def test_no_scheduler_to_connect_to_is_the_sweeps_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m experiments`` prints a ClusterRunFailed as one line and lets every other
    error through with its traceback: the connect failure must be one."""
    monkeypatch.setattr(fanout, "CONNECT_TIMEOUT_S", 1)
    with pytest.raises(fanout.ClusterRunFailed, match=r"^no scheduler to connect to: "):
        _sweep(EXPERIMENT, "tcp://127.0.0.1:9", tmp_path, io.StringIO())
