"""A figure over several seeds: its mean never travels without its spread.

One seed of a testbed run on a shared 2-core machine is one draw from a wide distribution
(recovery times of the same build have ranged over a factor of ten), so every figure a summary
gives over seeds comes as ``<name>_mean`` with ``<name>_min``, ``<name>_max``,
``<name>_stdev`` and ``<name>_seeds`` (how many seeds gave a value) beside it, and summary.txt
writes it as "mean (min-max) over N seeds", the form README quotes.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic

from experiments.json_form import FLAT, TEXT
from experiments.records import ModeT, RecordT, Run, Runs

#: The keys that must stand beside every ``<name>_mean`` of a summary's figures.
SPREAD_SUFFIXES = ("_min", "_max", "_stdev", "_seeds")


@dataclass(frozen=True)
class Spread:
    """A figure over seeds: its mean, min, max, sample stdev (None below two values) and the
    seeds that gave a value; the figures are None when none did. Written into a summary's
    figures as ``<name>_mean``, ``<name>_min``, ... (``json_form.PREFIXED``)."""

    mean: float | None
    min: float | None
    max: float | None
    stdev: float | None
    seeds: int

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Spread:
        """The spread of ``values``, leaving out the None ones (seeds without a value)."""
        known = [float(v) for v in values if v is not None]
        return cls(
            mean=statistics.fmean(known) if known else None,
            min=min(known) if known else None,
            max=max(known) if known else None,
            stdev=statistics.stdev(known) if len(known) > 1 else None,
            seeds=len(known),
        )


def spread_problems(figures: Mapping[str, object], path: str = "figures") -> list[str]:
    """Every ``<name>_mean`` in ``figures`` as summary.json holds them (nested objects
    included) that lacks its spread."""
    problems = []
    for name, value in figures.items():
        if isinstance(value, Mapping):
            problems.extend(spread_problems(value, f"{path}.{name}"))
        elif name.endswith("_mean"):
            figure = name.removesuffix("_mean")
            missing = [figure + s for s in SPREAD_SUFFIXES if figure + s not in figures]
            if missing:
                problems.append(f"{path}.{name} has no spread beside it: lacks {missing}")
    return problems


def describe(
    spread: Spread,
    show: Callable[[float], str],
    total_seeds: int,
    unit: str = "",
) -> str:
    """``spread`` as "mean unit (min-max) over N seeds", each number written by ``show``
    ("-" when no seed gave a value; "of M" when some seeds gave none)."""
    if spread.mean is None or spread.min is None or spread.max is None:
        return f"- (no value in {total_seeds} seed(s))"
    seeds = spread.seeds
    unit = f" {unit}" if unit else ""
    if seeds == 1:
        return (
            f"{show(spread.mean)}{unit} (1 seed{'' if total_seeds == 1 else f' of {total_seeds}'})"
        )
    over = f"{seeds} seeds" + ("" if seeds == total_seeds else f" of {total_seeds}")
    return f"{show(spread.mean)}{unit} ({show(spread.min)}-{show(spread.max)}) over {over}"


@dataclass(frozen=True)
class SeedPair(Generic[ModeT]):
    """One seed's runs side by side: its modes in the order they ran, and for each named
    value every mode's (``values["recovery_s"][mode]``)."""

    seed: int = field(metadata=TEXT)
    order: tuple[ModeT, ...] = field(metadata=TEXT)
    values: Mapping[str, Mapping[ModeT, float | None]] = field(metadata=FLAT)


def seed_pairs(
    runs: Runs[ModeT, RecordT],
    values: Mapping[str, Callable[[Run[RecordT]], float | None]],
) -> tuple[SeedPair[ModeT], ...]:
    """Each seed's runs side by side: the seed, its modes in the order they ran (by each
    run's ``sequence``), and for every name in ``values`` that value of each mode's run;
    seeds that not every mode has are left out."""
    modes = list(runs)
    if not modes:
        return ()
    seeds = sorted(set.intersection(*(set(runs[mode]) for mode in modes)))
    return tuple(
        SeedPair(
            seed,
            tuple(sorted(modes, key=lambda mode: runs[mode][seed].sequence)),
            {
                name: {mode: value(runs[mode][seed]) for mode in modes}
                for name, value in values.items()
            },
        )
        for seed in seeds
    )


def mbit(bps: float) -> str:
    """Bits per second as summary.txt writes them: Mbit/s, three decimals."""
    return f"{bps / 1e6:.3f}"


def two_places(value: float) -> str:
    """A ratio or a time in seconds as summary.txt writes it."""
    return f"{value:.2f}"


def three_places(value: float) -> str:
    """A retention as summary.txt writes it."""
    return f"{value:.3f}"
