"""A run's key figure in a few words, for its progress line (``goodput 812.345 Mbit/s``,
``back to 90 % in 1.23 s``, ``busbw 0.412 MB/s``, or the failure).

Each phrase writes its number as summary.txt does (:mod:`experiments.stats`), from the
figure the run's record already holds: the progress line says what the summary will.
"""

from __future__ import annotations

from collections.abc import Mapping

from experiments.records import RunRecord, Transfer
from experiments.stats import mbit


def goodput(transfers: Mapping[str, Transfer]) -> str:
    """The transfers' goodput together, as summary.txt writes goodput."""
    return f"goodput {mbit(sum(t.goodput_bps for t in transfers.values()))} Mbit/s"


def failures(transfers: Mapping[str, Transfer]) -> str | None:
    """``FAILED 1 of 4: <the first one's error>``; None when every transfer completed."""
    failed = [t for t in transfers.values() if not t.completed]
    if not failed:
        return None
    return f"FAILED {len(failed)} of {len(transfers)}: {failed[0].error or 'did not complete'}"


def with_failures(figure: str, transfers: Mapping[str, Transfer]) -> str:
    """``figure``, then the failures where a transfer did not complete."""
    failed = failures(transfers)
    return figure if failed is None else f"{figure}, {failed}"


def transfers_headline(record: RunRecord) -> str:
    """Every experiment's default: the goodput of the run's transfers, and any failure."""
    return with_failures(goodput(record.transfers), record.transfers)
