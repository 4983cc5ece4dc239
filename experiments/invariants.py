"""What every run must hold, over all of them, and summary.txt's account of it.

The transfers of modes that may not fail lost no byte and all completed; a transfer of a mode
that may fail as a result (``Experiment.may_fail``: a RoCE QP out of retries) either
completed losing nothing or failed with its error recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from experiments.json_form import TEXT
from experiments.records import RunRecord

M = TypeVar("M", bound=Hashable)


@dataclass(frozen=True)
class Invariants(Generic[M]):
    """Bytes lost and whether every transfer completed, over the modes that may not fail
    (``strict_modes``); the failures of the others that are results, and what broke the
    rules (``violations``); ``held`` says whether all of it held."""

    bytes_lost: int
    all_completed: bool
    strict_modes: tuple[M, ...] = field(metadata=TEXT)
    may_fail_modes: tuple[M, ...] = field(metadata=TEXT)
    failures_as_results: tuple[str, ...]
    violations: tuple[str, ...]
    held: bool


def _never(mode: object) -> bool:
    del mode
    return False


def invariants(
    runs: Mapping[M, Mapping[int, RunRecord]], may_fail: Callable[[M], bool] = _never
) -> Invariants[M]:
    """The invariants over every run (see the module's docstring)."""
    strict = tuple(mode for mode in runs if not may_fail(mode))
    transfers = [
        t for mode in strict for run in runs[mode].values() for t in run.transfers.values()
    ]
    results, violations = [], []
    for mode in runs:
        if mode in strict:
            continue
        for seed, run in runs[mode].items():
            for name, transfer in run.transfers.items():
                where = f"{seed}/{mode}/{name}"
                if transfer.completed:
                    if transfer.bytes_lost != 0:
                        violations.append(f"{where} completed yet lost {transfer.bytes_lost} bytes")
                elif transfer.error:
                    at = transfer.failed_at_s
                    when = "" if at is None else f" at {at:.2f} s"
                    results.append(f"{where} failed{when}: {transfer.error}")
                else:
                    violations.append(f"{where} did not complete and recorded no error")
    bytes_lost = sum(t.bytes_lost or 0 for t in transfers)
    all_completed = all(t.completed for t in transfers)
    return Invariants(
        bytes_lost=bytes_lost,
        all_completed=all_completed,
        strict_modes=strict,
        may_fail_modes=tuple(mode for mode in runs if mode not in strict),
        failures_as_results=tuple(results),
        violations=tuple(violations),
        held=bytes_lost == 0 and all_completed and not violations,
    )


def invariant_lines(held: Invariants[M]) -> list[str]:
    """summary.txt's account of :func:`invariants`."""
    over = ""
    if held.may_fail_modes:
        over = (
            f" (of the modes that must: {', '.join(map(str, held.strict_modes)) or 'none'}; "
            f"{', '.join(map(str, held.may_fail_modes))} may fail as a result)"
        )
    return [
        f"invariants: bytes lost {held.bytes_lost}, every transfer completed: "
        f"{'yes' if held.all_completed else 'NO'}{over}",
        *(f"failed, a result: {line}" for line in held.failures_as_results),
        *(f"INVARIANT BROKEN: {line}" for line in held.violations),
    ]
