"""What `make test` skipped, and why: one JSON line per skip, summed up at the end.

The pytest suites (through ``tests/conftest.py``, when given ``--skip-log FILE``) and the PTF
runner (``--skip-log FILE``) each append a line per skipped test or suite: the suite, the
reason, and what was skipped. ``python -m tests.skip_log FILE`` prints one line per distinct
reason with how many tests it skipped and in which suites, most first; `make test` ends with it,
so a skip that hides a missing tool or a broken probe is seen every run, not lost in the scroll.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def record(log: Path, suite: str, reason: str, what: str) -> None:
    """Append one skip to ``log``."""
    line = json.dumps({"suite": suite, "reason": reason, "what": what})
    with log.open("a", encoding="utf-8") as out:
        out.write(line + "\n")


def summary(lines: list[str]) -> list[str]:
    """One line per reason, ``<count> <reason> [<suites>]``, most skips first (then by
    reason), under a line with the total; "no test skipped" when there are none."""
    skips = [json.loads(line) for line in lines if line.strip()]
    if not skips:
        return ["skips: no test skipped"]
    counts = Counter(skip["reason"] for skip in skips)
    suites: dict[str, set[str]] = {}
    for skip in skips:
        suites.setdefault(skip["reason"], set()).add(skip["suite"])
    width = len(str(max(counts.values())))
    out = [f"skips: {len(skips)} in all, {len(counts)} reasons"]
    for reason, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        out.append(f"  {count:>{width}}  {reason}  [{', '.join(sorted(suites[reason]))}]")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.skip_log FILE", file=sys.stderr)
        return 2
    log = Path(argv[0])
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    print("\n".join(summary(lines)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
