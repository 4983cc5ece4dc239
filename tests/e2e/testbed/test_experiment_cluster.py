"""Sweeps on a cluster (``python -m experiments NAME --cluster ADDRESS``): a scheduler and two
workers, each a separate process standing for a machine, run a short two-seed ``loss``
experiment (two transports, lossless and 1 %, 2 s each) on the kernel target, the cheapest.

The scheduler, each worker and the client are each in a network namespace of their own, on a
LAN of them (a bridge; :mod:`tests.e2e.testbed.cluster_lan`), with an address each: none is in
the root namespace (a worker in a child namespace may not reach a scheduler in the root one,
depending on the host's routing and firewall). A worker's fabric comes up inside its
machine's namespace, its hosts' and switches' namespaces named by its run as anywhere. One
worker is killed (SIGKILL to its process group, its machine lost) once it has finished a run
of its seed and started the next; the scheduler gives the seed to the other worker once that
has finished its own, the killed worker comes back and removes what its killed run left
before it joins, and both seeds complete, the rerun recorded, the merged summary of the same
form as a local run's. A worker whose tree is at another commit refuses its seed with a
message naming both commits.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from experiments.cluster.tree import tree_identity
from experiments.summary import Summary
from tests.e2e.mininet.environment import forwarding_skip_reason
from tests.e2e.testbed.cluster_lan import Lan
from tests.e2e.testbed.cluster_processes import REPO, Cluster
from tests.e2e.testbed.experiment_run import checked_results, experiment_command

pytestmark = [pytest.mark.mininet, pytest.mark.usefixtures("runs_dir")]

TARGET = "linux"
SETTINGS = {
    "rates_percent": "0,1",
    "transports": "mrc,single",
    "perftest_timeouts": "",
    "duration_s": "2",
}
#: A run of the killed worker's seed ended there, and its next one started.
SECOND_RUN = re.compile(r"^loss \[\d/8\] \S+ seed (\d) on machine-a: started$", re.M)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A scheduler, and whatever workers the test starts; all ended after the test."""
    reason = forwarding_skip_reason(TARGET)
    if reason:
        pytest.skip(reason)
    logs = tmp_path / "cluster-logs"
    logs.mkdir()
    lan = Lan()
    started = Cluster(logs, lan)
    try:
        lan.open()
        started.start_scheduler()
        yield started
    finally:
        started.close()
        lan.close()


def _sweep(
    cluster: Cluster, topology: Path, out: Path, seeds: int, log: Path
) -> subprocess.Popen[bytes]:
    command = experiment_command("loss", topology, out, SETTINGS, TARGET, seeds)
    with log.open("wb") as stderr:
        return subprocess.Popen(
            cluster.command("client", [*command, "--cluster", cluster.address]),
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )


def _second_run_started(log: Path, timeout: float = 300) -> int:
    """The seed of machine-a once it has started its second run (told after its first run's
    end line), waiting up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        starts = SECOND_RUN.findall(log.read_text(errors="replace"))
        if len(starts) >= 2:
            return int(starts[1])
        time.sleep(0.2)
    raise AssertionError(f"machine-a never started a second run:\n{log.read_text()[-3000:]}")


def _wait_for_line(log: Path, start: str, timeout: float = 300) -> None:
    """Until a line of ``log`` starts with ``start``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(line.startswith(start) for line in log.read_text(errors="replace").splitlines()):
            return
        time.sleep(0.2)
    raise AssertionError(f"no line {start!r}...:\n{log.read_text()[-3000:]}")


def test_a_worker_lost_mid_run_has_its_seed_rerun_and_both_seeds_merge_as_a_local_run(
    cluster: Cluster, leaf_spine_file: Path, tmp_path: Path
) -> None:
    cluster.start_worker("machine-a")
    cluster.start_worker("machine-b")
    told = tmp_path / "sweep.err"
    sweep = _sweep(cluster, leaf_spine_file, tmp_path / "results", 2, told)
    try:
        lost_seed = _second_run_started(told)
        cluster.kill("machine-a")
        _wait_for_line(told, f"loss seed {lost_seed}: rerun on machine-b ")
        # the machine comes back: before it joins, it removes what its killed run left
        cluster.start_worker("machine-a", process="machine-a-back")
        assert sweep.wait(timeout=600) == 0, told.read_text()[-5000:]
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    stderr = told.read_text()
    came_back = cluster.log("machine-a-back")
    assert re.search(r"removed run mn[0-9a-f]{4}, left by a killed run", came_back), came_back
    directory, summary = checked_results(
        "loss", leaf_spine_file, tmp_path / "results", TARGET, 2, stderr
    )
    # the same form as a local run's summary, with the cluster's account beside it
    local_keys = [f.name for f in dataclasses.fields(Summary) if f.name != "cluster"]
    assert list(summary) == [*local_keys, "cluster"]
    account = summary["cluster"]
    assert account["scheduler"] == cluster.address
    assert sorted(account["seeds"]) == ["0", "1"]
    # the lost seed ran again on the other machine, once that had finished its own seed
    seeds = account["seeds"]
    assert (seeds[str(lost_seed)]["machine"], seeds[str(lost_seed)]["attempts"]) == ("machine-b", 2)
    assert (seeds[str(1 - lost_seed)]["machine"], seeds[str(1 - lost_seed)]["attempts"]) == (
        "machine-b",
        1,
    )
    (rerun,) = account["reruns"]
    assert rerun["seed"] == lost_seed and rerun["lost_machine"] == "machine-a"
    assert rerun["runs_dropped"] == 1
    assert rerun["why"].startswith(f"worker machine-a (tcp://{cluster.lan.addresses['machine-a']}:")
    machine_b = cluster.lan.addresses["machine-b"]
    assert (
        " was lost mid-run after 1 of 4 run(s), which were dropped; "
        f"rerun on machine-b (tcp://{machine_b}:"
    ) in rerun["why"]
    assert f"seed {lost_seed} rerun: {rerun['why']}" in (directory / "summary.txt").read_text()
    assert all(account["task_start_s"][seed] > 0 for seed in ("0", "1"))
    assert all(account["result_bytes"][seed] > 0 for seed in ("0", "1"))
    # the client told each run with its machine, the rerun, and the count
    assert f"loss seed {lost_seed}: rerun on " in stderr
    assert re.search(r"^loss \[\d/8\] \S+ seed \d on machine-b: done in ", stderr, re.M)
    assert re.search(r"^loss: 8 of 8 runs done in ", stderr, re.M), stderr[-3000:]
    # only the finished attempts' bring-ups were merged: one per seed
    assert [bring_up["runs"][0][0] for bring_up in summary["bring_ups"]] == ["0", "1"]


def test_a_worker_at_another_commit_refuses_its_seed_naming_both_commits(
    cluster: Cluster, leaf_spine_file: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other-tree"
    other_commit = _tree_at_another_commit(other)
    address = cluster.start_worker("machine-c", tree=other)
    told = tmp_path / "sweep.err"
    sweep = _sweep(cluster, leaf_spine_file, tmp_path / "results", 1, told)
    try:
        assert sweep.wait(timeout=300) == 1
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    refusal = (
        f"worker machine-c ({address}) refuses seed 0: its tree is at {other_commit}, the "
        f"client's at {tree_identity()}; check out the client's commit there (without local "
        "changes) and start the worker again"
    )
    assert refusal in told.read_text(), told.read_text()[-3000:]
    made = list((tmp_path / "results").iterdir())
    assert len(made) == 1 and not (made[0] / "summary.json").exists()


def _tree_at_another_commit(path: Path) -> str:
    """This tree's committed files in a repository of their own at ``path``, committed
    there: the same code at another commit. Its commit."""
    path.mkdir()
    archive = subprocess.run(
        ["git", "archive", "HEAD"], cwd=REPO, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(path)], input=archive, check=True)

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=test", "-c", "user.email=test@invalid", *args],
            cwd=path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "the same files at another commit")
    return git("rev-parse", "HEAD")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
