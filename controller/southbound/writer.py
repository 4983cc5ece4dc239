"""Carry out a write plan in batches, and account for every update that failed.

Target-neutral: the writer knows plans and a ``send`` coroutine that puts one batch on the wire
and raises :class:`BatchWriteError` when the server refuses some or all of it. It never lets an
error escape: failures are returned with the entity they concern, so that the control loop logs
them and retries, and a failed update never stops the independent ones after it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field

from controller.southbound.plan import Operation, Update, WritePlan
from controller.southbound.records import RecordSet

#: Default number of updates per write request: far below gRPC's 4 MB message limit (an update
#: is under 100 bytes) and large enough that a whole fabric intent takes a handful of requests.
DEFAULT_MAX_BATCH = 1000


class BatchWriteError(Exception):
    """A write request failed.

    ``failed`` maps the position of each refused update in the batch to the server's message;
    the others were applied. When it is empty the request failed as a whole (channel down,
    timeout, refused outright) and what the switch now holds is unknown.
    """

    def __init__(self, message: str, failed: Mapping[int, str] | None = None) -> None:
        super().__init__(message)
        self.failed: dict[int, str] = dict(failed or {})

    @property
    def whole_request(self) -> bool:
        """True when no per-update detail came back: nothing is known to have been applied."""
        return not self.failed


SendBatch = Callable[[tuple[Update, ...]], Awaitable[None]]


@dataclass(frozen=True)
class WriteFailure:
    """An update the switch refused (or that was lost with its request), and why."""

    update: Update
    error: str

    def describe(self) -> str:
        """One line for logs: what failed and the server's reason."""
        return f"{self.update.describe()}: {self.error}"


@dataclass(frozen=True)
class WriteOutcome:
    """What a plan's execution did."""

    applied: tuple[Update, ...] = ()
    failures: tuple[WriteFailure, ...] = ()
    requests: int = 0
    #: False when a request failed as a whole: the switch's state is then unknown.
    complete: bool = True
    error: str | None = field(default=None)

    @property
    def ok(self) -> bool:
        """Every update of the plan was applied."""
        return self.complete and not self.failures

    def held_after(self, held: RecordSet) -> RecordSet | None:
        """What the switch holds now, from what it held before; None when unknown."""
        if not self.complete:
            return None
        upserts = [u.record for u in self.applied if u.operation is not Operation.DELETE]
        deletes = [u.record.key for u in self.applied if u.operation is Operation.DELETE]
        return held.replacing(upserts, deletes)


def iter_batches(plan: WritePlan, max_batch: int) -> Iterator[tuple[Update, ...]]:
    """The plan as write requests: each phase cut into chunks of at most ``max_batch`` updates.

    A batch never spans two phases, so the plan's ordering guarantee holds batch by batch;
    ``max_batch=1`` is one update per request (the benchmark's baseline).
    """
    if max_batch < 1:
        raise ValueError(f"max_batch must be at least 1, not {max_batch}")
    for phase in plan.phases:
        for start in range(0, len(phase), max_batch):
            yield phase[start : start + max_batch]


async def execute_plan(
    plan: WritePlan, send: SendBatch, max_batch: int = DEFAULT_MAX_BATCH
) -> WriteOutcome:
    """Send the plan batch by batch; stop early only when a whole request fails."""
    applied: list[Update] = []
    failures: list[WriteFailure] = []
    requests = 0
    for batch in iter_batches(plan, max_batch):
        requests += 1
        try:
            await send(batch)
        except BatchWriteError as error:
            if error.whole_request:
                failures.extend(WriteFailure(update, str(error)) for update in batch)
                return WriteOutcome(
                    tuple(applied), tuple(failures), requests, complete=False, error=str(error)
                )
            for index, update in enumerate(batch):
                if index in error.failed:
                    failures.append(WriteFailure(update, error.failed[index]))
                else:
                    applied.append(update)
            continue
        applied.extend(batch)
    return WriteOutcome(tuple(applied), tuple(failures), requests)
