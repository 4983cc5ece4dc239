"""Where ranks meet before a job: each publishes a record, and reads everyone's.

NCCL's ranks exchange their connection details through a bootstrap the launcher provides;
here the launcher provides a directory that every rank can reach (ranks in other network
namespaces of the same machine share its file system, as they share the agents' control
sockets). A round is named (``wire``: QP numbers, PSNs, R_Keys; ``ready``: every QP is in
RTS with its receives posted, so nobody writes before its peer can take it); rank r of a
round writes ``<round>-<r>.json`` atomically (a temporary file renamed into place), and a
rank reading the round waits until all N files are there. Nothing else is needed: no port
to agree on, no server that must outlive its clients, and a killed job leaves a directory
that says how far each rank got.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class RendezvousTimeout(TimeoutError):
    """Not every rank published its record in time; the message names those missing."""


class FileRendezvous:
    """The rounds of one job in ``directory`` (created if missing)."""

    def __init__(
        self,
        directory: Path,
        ranks: int,
        timeout_s: float = 60.0,
        poll_s: float = 0.02,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ranks < 1:
            raise ValueError(f"a rendezvous needs at least one rank, got {ranks}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.ranks = ranks
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.clock = clock

    def _path(self, name: str, rank: int) -> Path:
        if not name.isidentifier():
            raise ValueError(f"a round's name is a word, got {name!r}")
        return self.directory / f"{name}-{rank}.json"

    def publish(self, name: str, rank: int, record: dict[str, Any]) -> None:
        """Rank ``rank``'s record for round ``name`` (visible to readers all at once)."""
        if not 0 <= rank < self.ranks:
            raise ValueError(f"rank {rank} is outside 0..{self.ranks - 1}")
        path = self._path(name, rank)
        temporary = path.with_suffix(f".tmp{os.getpid()}")
        temporary.write_text(json.dumps(record), encoding="utf-8")
        os.replace(temporary, path)

    def gather(self, name: str) -> list[dict[str, Any]]:
        """Every rank's record of round ``name``, in rank order, once all are there;
        RendezvousTimeout naming the ranks still missing after ``timeout_s``."""
        deadline = self.clock() + self.timeout_s
        while True:
            missing = [r for r in range(self.ranks) if not self._path(name, r).exists()]
            if not missing:
                break
            if self.clock() >= deadline:
                raise RendezvousTimeout(
                    f"rendezvous round {name!r} in {self.directory}: ranks {missing} did not "
                    f"publish within {self.timeout_s:g} s"
                )
            time.sleep(self.poll_s)
        return [
            json.loads(self._path(name, r).read_text(encoding="utf-8")) for r in range(self.ranks)
        ]
