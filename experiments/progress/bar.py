"""The live bar on a terminal, drawn by rich: the current step, a bar of the steps done, the
count, the time left by :mod:`experiments.progress.estimate` (rich's own guess knows neither
the plans nor the bring-ups) and the time elapsed. Lines printed while it is drawn scroll
above it.

Standard output is never redirected (the summary a script parses goes there); standard error
is, so that a stray warning scrolls above the bar too, and so are the root logger's stream
handlers that write to the bar's stream (``-v``'s log lines), which would otherwise hold the
stream they were made with and tear the bar.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.progress import Progress as RichProgress


class LiveBar:
    """A bar of ``total`` steps on ``stream`` (a terminal), from :meth:`start` to :meth:`stop`."""

    def __init__(self, stream: TextIO, total: int) -> None:
        self.stream = stream
        self.console = Console(file=stream)
        self.progress = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[left]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,  # the final line says it all once the bar is gone
            redirect_stdout=False,
            redirect_stderr=True,
        )
        self.task: TaskID = self.progress.add_task("", total=total, left="")
        self._moved: list[tuple[logging.StreamHandler[TextIO], TextIO]] = []

    def start(self) -> None:
        self.progress.start()
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is self.stream:
                self._moved.append((handler, handler.setStream(sys.stderr) or self.stream))

    def stop(self) -> None:
        for handler, stream in self._moved:
            handler.setStream(stream)
        self._moved.clear()
        self.progress.stop()

    def show(self, doing: str, done: int, left: str) -> None:
        """What is going on now, the steps done and the time left."""
        self.progress.update(self.task, description=doing, completed=done, left=left)

    def print(self, line: str) -> None:
        """A line above the bar, as given (no markup, no highlighting)."""
        self.progress.console.print(line, markup=False, highlight=False, soft_wrap=True)
