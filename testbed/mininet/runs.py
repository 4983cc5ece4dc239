"""The registry of Mininet runs: one directory per run prefix, with its logs and an owner record.

``<runs root>/<prefix>/run.json`` names the process that owns the run (pid and start time, so a
reused pid is not mistaken for the owner). ``python -m testbed.mininet clean`` removes what
runs with a dead owner left behind; a live run is only removed on request. The root is
``/tmp/mrc-mininet`` unless ``MRC_MININET_RUNS`` names another directory.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from testbed.mininet.naming import check_run_prefix, random_run_prefix, run_of
from testbed.mininet.system import list_netns, list_root_links, process_start_time

RUNS_ROOT_ENV = "MRC_MININET_RUNS"
DEFAULT_RUNS_ROOT = Path("/tmp/mrc-mininet")
RECORD_FILE = "run.json"


def runs_root() -> Path:
    """Directory holding one subdirectory per run."""
    return Path(os.environ.get(RUNS_ROOT_ENV, str(DEFAULT_RUNS_ROOT)))


@dataclass(frozen=True)
class RunRecord:
    """Who owns a run, and what it is running."""

    prefix: str
    owner_pid: int
    owner_start_time: int | None
    topology: str
    started_at: float

    @property
    def owner_alive(self) -> bool:
        """Whether the owning process still runs (the same process, not a reused pid)."""
        start = process_start_time(self.owner_pid)
        return start is not None and start == self.owner_start_time


def allocate_prefix(root: Path, attempts: int = 64) -> str:
    """A prefix no run directory, namespace or interface on this machine uses yet."""
    in_use = {run_of(name) for name in list_netns() + list_root_links()}
    for _ in range(attempts):
        prefix = random_run_prefix()
        if prefix not in in_use and not (root / prefix).exists():
            return prefix
    raise RuntimeError(f"no free run prefix after {attempts} tries (clean up old runs)")


def write_record(run_dir: Path, topology: str) -> RunRecord:
    """Record this process as the owner of the run in ``run_dir`` (named by its prefix)."""
    pid = os.getpid()
    record = RunRecord(
        prefix=check_run_prefix(run_dir.name),
        owner_pid=pid,
        owner_start_time=process_start_time(pid),
        topology=topology,
        started_at=time.time(),
    )
    (run_dir / RECORD_FILE).write_text(json.dumps(asdict(record), indent=2) + "\n")
    return record


def read_record(run_dir: Path) -> RunRecord | None:
    """The record in ``run_dir``, or None when it is missing or unreadable."""
    try:
        data = json.loads((run_dir / RECORD_FILE).read_text())
        return RunRecord(**data)
    except (OSError, ValueError, TypeError):
        return None


def remove_record(run_dir: Path) -> None:
    """Forget the run's owner (its logs, if kept, stay)."""
    (run_dir / RECORD_FILE).unlink(missing_ok=True)


def recorded_runs(root: Path) -> dict[str, RunRecord]:
    """Every run with an owner record, by prefix."""
    records = {}
    if root.is_dir():
        for run_dir in root.iterdir():
            record = read_record(run_dir)
            if record is not None:
                records[record.prefix] = record
    return records
