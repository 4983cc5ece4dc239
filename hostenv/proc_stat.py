"""Each CPU core's time from ``/proc/stat``: the one reader of it, for the experiments' load
records (``experiments.cpu``) and the benches' shares of their pinned cores
(``tools.cpu_accounting``).

The kernel counts a core's time since boot in jiffies, by what the core did: ``user``,
``nice`` (user time of processes at background priority, nice > 0), ``system``, ``idle``,
``iowait``, ``irq``, ``softirq`` and ``steal`` (time the hypervisor gave another virtual
machine); the later columns (guest time) are already counted in ``user`` and ``nice``. What a
window cost is the difference of two readings (:meth:`CoreJiffies.since`). Which columns count
as busy is the reader's rule, not the kernel's: the experiments leave ``nice`` out (it yields
to the run), the veth benches count it (it took their pinned core).
"""

from __future__ import annotations

from dataclasses import astuple, dataclass
from pathlib import Path

#: /proc/stat's per-CPU columns, in order (later columns, guest time, are already in user).
STAT_COLUMNS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
PROC_STAT = Path("/proc/stat")


@dataclass(frozen=True)
class CoreJiffies:
    """One core's jiffies by /proc/stat column (a column an old kernel lacks reads 0)."""

    user: int = 0
    nice: int = 0
    system: int = 0
    idle: int = 0
    iowait: int = 0
    irq: int = 0
    softirq: int = 0
    steal: int = 0

    @property
    def total(self) -> int:
        """Every jiffy, whatever the core did."""
        return sum(astuple(self))

    def since(self, earlier: CoreJiffies) -> CoreJiffies:
        """The jiffies of each column between ``earlier`` and this reading."""
        columns = zip(astuple(self), astuple(earlier), strict=True)
        return CoreJiffies(*(now - then for now, then in columns))


def parse_proc_stat(text: str) -> dict[int, CoreJiffies]:
    """Every per-core line (``cpu0``, ``cpu1``, ...) of a /proc/stat text, by core number; the
    all-CPU line ``cpu`` is left out (it is the sum of these)."""
    cores: dict[int, CoreJiffies] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        number = name.removeprefix("cpu")
        if name.startswith("cpu") and number.isdigit():
            values = (int(value) for value in rest.split()[: len(STAT_COLUMNS)])
            cores[int(number)] = CoreJiffies(*values)
    return cores


def read_proc_stat(path: Path = PROC_STAT) -> dict[int, CoreJiffies]:
    """Every core's jiffies now."""
    return parse_proc_stat(path.read_text())
