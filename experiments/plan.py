"""The order runs are made in, and the bring-ups that serve them.

Modes take turns going first, seed by seed (ABBA: seed 0 runs the modes in their listed order,
seed 1 in reverse, seed 2 as seed 0, ...), so that whatever drifts over a run (the machine's
other load, a hypervisor's steal, a switch's caches) favours neither mode.

Modes that need the same network (``mrc`` and ``single`` differ only in the agents' EVs) share
one bring-up. Modes that differ in how the switches are configured (``incast``: ECN and
trimming on or off) or in the controller's routing policy (``Variant.routing``) get a
bring-up each, in the same run, each on its own topology file: the controller programs what
a file says, and a fresh network guarantees that nothing of one mode's configuration or
queues lingers into the other. Consecutive runs on the same network share a bring-up: one
in all for modes that share a network, seeds + 1 for two modes that do not (the order
ON | OFF OFF | ON ON | ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic

from experiments.experiment import Experiment, F, M, P, R, S
from experiments.topology_variant import Variant

#: How the modes' order is chosen, as summary.json records it beside each seed's order.
ORDER_RULE = "ABBA: modes in their listed order on even seeds, reversed on odd seeds"


def run_order(modes: Sequence[M], seeds: int) -> list[tuple[int, M]]:
    """Every (seed, mode) in the order they run: ABBA across seeds (see ORDER_RULE), so
    that over every two seeds each mode goes first once."""
    return [
        (seed, mode)
        for seed in range(seeds)
        for mode in (modes if seed % 2 == 0 else tuple(reversed(modes)))
    ]


def seed_orders(modes: Sequence[M], seeds: int) -> dict[str, list[str]]:
    """Each seed's modes in the order they ran, by label (summary.json's ``order.per_seed``)."""
    orders: dict[str, list[str]] = {}
    for seed, mode in run_order(modes, seeds):
        orders.setdefault(str(seed), []).append(str(mode))
    return orders


@dataclass(frozen=True)
class BringUp(Generic[M]):
    """One bring-up: the topology variant it runs (its file suffix, see :func:`bring_ups`)
    and the (seed, mode) runs it serves, in order."""

    suffix: str
    runs: tuple[tuple[int, M], ...]


def bring_ups(
    experiment: Experiment[P, M, R, S, F], params: P
) -> dict[str, tuple[Variant, list[M]]]:
    """The experiment's modes grouped by the network they need, in mode order, keyed by the
    suffix of their files: "" when every mode shares one network (``topology.yaml``), else
    ``-<mode>`` of the group's first mode (``topology-<mode>.yaml``)."""
    groups: dict[Variant, list[M]] = {}
    for mode in experiment.modes_of(params):
        groups.setdefault(experiment.variant(params, mode), []).append(mode)
    if len(groups) == 1:
        ((variant, modes),) = groups.items()
        return {"": (variant, modes)}
    return {f"-{modes[0]}": (variant, modes) for variant, modes in groups.items()}


def plan_bring_ups(
    experiment: Experiment[P, M, R, S, F], params: P, seeds: int
) -> list[BringUp[M]]:
    """The runs of :func:`run_order`, cut into bring-ups wherever the next run needs
    another topology variant than the one before it."""
    return _cut(experiment, params, run_order(experiment.modes_of(params), seeds))


def plan_seed(experiment: Experiment[P, M, R, S, F], params: P, seed: int) -> list[BringUp[M]]:
    """The bring-ups of one seed's runs alone, in that seed's order of :func:`run_order`:
    what a cluster's worker runs when the seed is its task (no bring-up is shared with
    another seed, which runs on another machine)."""
    runs = run_order(experiment.modes_of(params), seed + 1)
    return _cut(experiment, params, [(s, mode) for s, mode in runs if s == seed])


def _cut(
    experiment: Experiment[P, M, R, S, F], params: P, runs: Sequence[tuple[int, M]]
) -> list[BringUp[M]]:
    """``runs`` in order, cut into bring-ups wherever the next run needs another topology
    variant than the one before it."""
    suffix_of = {
        mode: suffix
        for suffix, (_, modes) in bring_ups(experiment, params).items()
        for mode in modes
    }
    plan: list[BringUp[M]] = []
    for seed, mode in runs:
        suffix = suffix_of[mode]
        if plan and plan[-1].suffix == suffix:
            plan[-1] = BringUp(suffix, (*plan[-1].runs, (seed, mode)))
        else:
            plan.append(BringUp(suffix, ((seed, mode),)))
    return plan
