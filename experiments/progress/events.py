"""What happens inside a run (a link cut, the fabric mended, a job's iteration), told as it
happens: ``event("%s cut", link)``.

Events are log records of one logger, ``experiments.events``, at INFO: an experiment's code
tells them without knowing who listens. A :class:`~experiments.progress.tracker.Progress`
at ``-v`` shows them among its lines (with the run they belong to and its time); without
one they are ordinary log records, which ``-v``'s logging shows and the default level hides.
A logger rather than a callback, because the timeline that cuts links runs on a thread of its
own, and logging is safe across threads.
"""

from __future__ import annotations

import logging

#: The logger every event goes to.
EVENTS = logging.getLogger("experiments.events")


def event(message: str, *args: object) -> None:
    """Tell that something happened (``message % args``, as logging formats it)."""
    EVENTS.info(message, *args)
