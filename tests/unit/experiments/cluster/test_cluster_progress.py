"""The client's lines for a sweep on a cluster: each run's start and end with the machine it
ran on and the overall count, a rerun with the worker lost and the runs dropped (the count
goes back down by them), and nothing of another sweep's events on the same scheduler."""

from __future__ import annotations

import io
from typing import Any

from experiments.cluster.progress import ClusterProgress
from experiments.progress import Display, Step

A, B = "tcp://10.0.0.1:4000", "tcp://10.0.0.2:4000"
STEPS = [Step(f"{mode} seed {seed}", 2.0) for seed in (0, 1) for mode in ("mrc", "single")]


def _event(kind: str, seed: int, machine: str, worker: str, **fields: Any) -> Any:
    message = {"sweep": "s1", "kind": kind, "seed": seed, "machine": machine, "worker": worker}
    return (0.0, {**message, **fields})


def test_runs_are_told_with_their_machine_and_a_rerun_with_the_worker_lost() -> None:
    stream = io.StringIO()
    told = ClusterProgress(Display(stream=stream, tick_s=None), "loss", STEPS, "s1")
    told.plan("tcp://10.0.0.9:8786", 2, 2)
    told.event(_event("seed", 1, "machine-a", A))
    told.event(_event("began", 1, "machine-a", A, index=2))
    told.event(_event("ended", 1, "machine-a", A, index=2, took_s=2.5, figure="goodput 1 Mbit/s"))
    told.event((0.0, {"sweep": "another", "kind": "seed", "seed": 0, "machine": "x", "worker": B}))
    told.event(_event("seed", 1, "machine-b", B))
    told.final()
    assert stream.getvalue().splitlines()[:-1] == [
        "loss: 4 runs of 2 seeds on cluster tcp://10.0.0.9:8786, 2 workers",
        "loss [3/4] mrc seed 1 on machine-a: started",
        "loss [3/4] mrc seed 1 on machine-a: done in 2.5 s, goodput 1 Mbit/s; 1 of 4 done",
        f"loss seed 1: rerun on machine-b ({B}); machine-a ({A}) stopped mid-run after 1 "
        "run(s), dropped; 0 of 4 done",
    ]
    assert stream.getvalue().splitlines()[-1].startswith("loss: stopped after 0 of 4 runs in ")
    assert told.attempts.count(1) == 2 and told.attempts.count(0) == 0
