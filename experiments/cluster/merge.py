"""The seeds' results from a cluster, merged as a local run of the same seeds merges them:
runs and time series per mode and seed (seeds in order), the bring-ups in seed order with
their controller event logs named as a local run names its own (``controller-events`` with
the variant's suffix, numbered where a variant has several bring-ups)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.cluster.job import SeedResult
from experiments.experiment import Experiment, F, M, P, R, S
from experiments.runner import Measured
from experiments.summary import BringUpAccount


def merge(
    experiment: Experiment[P, M, R, S, F],
    params: P,
    results: Sequence[SeedResult[Any, Any, Any]],
    directory: Path,
) -> Measured[M, R, S]:
    """One run's runs, series and bring-ups from every seed's result; each bring-up's
    controller event log is written into ``directory`` under its merged name."""
    modes = experiment.modes_of(params)
    runs: dict[M, dict[int, Any]] = {mode: {} for mode in modes}
    series: dict[M, dict[int, Any]] = {mode: {} for mode in modes}
    ordered = sorted(results, key=lambda result: result.seed)
    for result in ordered:
        for mode in modes:
            runs[mode].update(result.measured.runs[mode])
            series[mode].update(result.measured.series[mode])
    for mode in modes:
        runs[mode] = dict(sorted(runs[mode].items()))
        series[mode] = dict(sorted(series[mode].items()))
    accounts = [(result, account) for result in ordered for account in result.measured.bring_ups]
    per_suffix: dict[str, int] = {}
    for _, account in accounts:
        per_suffix[_suffix(account)] = per_suffix.get(_suffix(account), 0) + 1
    seen: dict[str, int] = {}
    done: list[BringUpAccount] = []
    for result, account in accounts:
        suffix = _suffix(account)
        seen[suffix] = seen.get(suffix, 0) + 1
        events = account.controller_events
        if events is not None:
            numbered = f"-{seen[suffix]}" if per_suffix[suffix] > 1 else ""
            name = f"controller-events{suffix}{numbered}.jsonl"
            (directory / name).write_text(result.event_logs[events], encoding="utf-8")
            events = name
        done.append(dataclasses.replace(account, controller_events=events))
    return Measured(runs, series, tuple(done))


def _suffix(account: BringUpAccount) -> str:
    """The variant's file suffix, from its topology file's name (``topology-<mode>.yaml``)."""
    return account.topology.removeprefix("topology").removesuffix(".yaml")
