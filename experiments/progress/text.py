"""The progress lines, as plain text: one function per kind of line, so that the terminal's bar
and the plain lines (CI, ``tee``) say the same things and tests can read them.

Every line starts with the title (the experiment's or bench's name), a step's lines with its
place (``[2/6]``) and label, so that ``grep`` finds one run's story in a long log.
"""

from __future__ import annotations

from experiments.progress.estimate import Left


def duration(seconds: float) -> str:
    """``9.8 s`` under a minute, ``2m05s`` under an hour, ``1h02m`` beyond."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def time_left(left: Left | None) -> str:
    """``about 2m05s left``, ``at least 30.0 s left`` before a step has ended, or ``time left
    unknown until a step ends`` when nothing tells yet."""
    if left is None:
        return "time left unknown until a step ends"
    return f"{'at least' if left.at_least else 'about'} {duration(left.seconds)} left"


def place(index: int, total: int) -> str:
    """Step ``index`` (from 0) of ``total``, as a line shows it: ``[1/6]``."""
    return f"[{index + 1}/{total}]"


def counted(total: int, unit: str) -> str:
    """``4 runs``, ``1 run`` (``unit`` is given in the plural)."""
    return f"{total} {unit if total != 1 else unit.removesuffix('s')}"


def plan_line(title: str, total: int, unit: str, setups: int, left: Left | None) -> str:
    """The first line: how much is to be done, and how long it should take."""
    setup_text = f" in {setups} bring-up(s)" if setups else ""
    return f"{title}: {counted(total, unit)}{setup_text}; {time_left(left)}"


def started_line(title: str, index: int, total: int, label: str) -> str:
    return f"{title} {place(index, total)} {label}: started"


def ended_line(
    title: str,
    index: int,
    total: int,
    label: str,
    took_s: float,
    figure: str,
    done: int,
    left: Left | None,
) -> str:
    """A step's end: its time, its key figure, the count done and the time left."""
    return (
        f"{title} {place(index, total)} {label}: done in {duration(took_s)}, {figure}; "
        f"{done} of {total} done, {time_left(left)}"
    )


def still_line(
    title: str,
    doing: str,
    for_s: float,
    done: int,
    total: int,
    left: Left | None,
) -> str:
    """The heartbeat, after a while with no other line: what is going on, and since when."""
    return (
        f"{title} {doing}: still going, {duration(for_s)} in; {done} of {total} done, "
        f"{time_left(left)}"
    )


def event_line(title: str, where: str, message: str) -> str:
    """Something that happened (``-v``): where (a step's place and label and its time, or
    nothing between steps) and what."""
    return f"{title} {where}: {message}" if where else f"{title}: {message}"


def final_line(title: str, done: int, total: int, unit: str, took_s: float, ended: str) -> str:
    """The last line: the count done, in how long, and how it ended when not in full."""
    of = f"{done} of {counted(total, unit)}"
    if done == total and not ended:
        return f"{title}: {of} done in {duration(took_s)}"
    return f"{title}: {ended or 'stopped'} after {of} in {duration(took_s)}"
