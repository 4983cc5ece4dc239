"""The controller's structured event log: one JSON object per line, every one timestamped.

Each line carries ``ts`` (UTC wall time, ISO 8601 with microseconds, for people and for
correlating with other logs), ``mono`` (monotonic seconds, for measuring intervals between
events of one run) and ``event`` (what happened), then the event's own fields. Lines are
flushed as they are written, so ``tail -f`` and a benchmark reading the file see each event at
once.
Listeners (``add_listener``) get each record as it is written: the status socket's
subscriptions stream events from there.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from controller.app.clock import Clock, SystemClock


class EventLog:
    """Writes events as JSON lines to a text stream."""

    def __init__(self, stream: TextIO, clock: Clock | None = None) -> None:
        self._stream = stream
        self._clock = clock or SystemClock()
        self._owned = False
        self._listeners: list[Callable[[dict[str, object]], None]] = []

    @classmethod
    def open(cls, path: Path | None, clock: Clock | None = None) -> EventLog:
        """A log appending to ``path``, or writing to stdout when ``path`` is None."""
        if path is None:
            return cls(sys.stdout, clock)
        path.parent.mkdir(parents=True, exist_ok=True)
        log = cls(path.open("a", encoding="utf-8"), clock)
        log._owned = True
        return log

    def emit(self, event: str, **fields: object) -> None:
        """Write one event; values JSON cannot represent are written as their ``str()``."""
        stamp = datetime.fromtimestamp(self._clock.wall(), tz=UTC).isoformat()
        record = {"ts": stamp, "mono": round(self._clock.monotonic(), 6), "event": event}
        record.update(fields)
        self._stream.write(json.dumps(record, default=str) + "\n")
        self._stream.flush()
        for listener in self._listeners:
            listener(record)

    def add_listener(self, listener: Callable[[dict[str, object]], None]) -> None:
        """Call ``listener`` with every record written from now on (after it is written)."""
        self._listeners.append(listener)

    def close(self) -> None:
        """Close the file if this log opened it."""
        if self._owned:
            self._stream.close()
