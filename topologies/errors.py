"""Errors raised for a topology that cannot be used.

A broken topology must be reported before anything (Mininet, a switch, the controller) is touched,
and the report must tell the user where to look: every problem carries the file and the line it
was found on. Problems are collected, so one run shows every mistake of a stage at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with a topology file, located by file and line (1-based)."""

    source: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.message}"


class TopologyError(ValueError):
    """A topology file (or document) is malformed; ``problems`` lists every finding, by line."""

    def __init__(self, problems: list[Problem]) -> None:
        if not problems:
            raise ValueError("TopologyError needs at least one problem")
        self.problems: tuple[Problem, ...] = tuple(sorted(problems))
        super().__init__("\n".join(str(problem) for problem in self.problems))


class ItemRejected(Exception):
    """Internal: stops reading one item (a switch, a host, ...) after its first problem.

    The problem has already been recorded; the reader moves on to the next item so that the
    user still sees the problems of the other items.
    """


class ProblemLog:
    """Collects the problems of one loading stage for one source."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[Problem] = []

    def add(self, line: int, message: str) -> None:
        """Record a problem at ``line``."""
        self.problems.append(Problem(self.source, line, message))

    def reject(self, line: int, message: str) -> ItemRejected:
        """Record a problem and return the exception that abandons the current item."""
        self.add(line, message)
        return ItemRejected(message)

    def fail(self) -> NoReturn:
        """End the stage now, after a problem that leaves nothing else worth checking."""
        raise TopologyError(self.problems)

    def raise_if_any(self) -> None:
        """End the stage: raise a :class:`TopologyError` if anything was recorded."""
        if self.problems:
            raise TopologyError(self.problems)
