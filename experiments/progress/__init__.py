"""Progress of long jobs (an experiment's runs, a bench's measurements) on standard error:
a line per step's start and end with its key figure and the time left, a heartbeat while
a bring-up or a long run goes on, the events inside a run at ``-v``, and on a terminal a
live bar. See :mod:`~experiments.progress.tracker` for the lines and the bar,
:mod:`~experiments.progress.estimate` for the time left and
:mod:`~experiments.progress.events` for telling events.

It lives in ``experiments`` so that the benches in ``tools`` (the layer above) can use it.
"""

from experiments.progress.events import event
from experiments.progress.tracker import Display, Progress, Step, track

__all__ = ["Display", "Progress", "Step", "event", "track"]
