"""How the lines write times: tenths of a second under a minute, minutes and seconds under an
hour, hours and minutes beyond; the time left as a lower bound before a step has ended."""

from __future__ import annotations

import pytest

from experiments.progress.estimate import Left
from experiments.progress.text import counted, duration, time_left


@pytest.mark.parametrize(
    ("seconds", "written"),
    [
        (0.0, "0.0 s"),
        (9.84, "9.8 s"),
        (59.94, "59.9 s"),
        (60.0, "1m00s"),
        (125.4, "2m05s"),
        (3599.4, "59m59s"),
        (3600.0, "1h00m"),
        (3725.0, "1h02m"),
    ],
)
def test_a_duration_is_written_to_the_precision_its_size_needs(seconds: float, written: str):
    assert duration(seconds) == written


def test_the_time_left_says_whether_it_is_a_guess_or_a_lower_bound() -> None:
    assert time_left(Left(125.0, at_least=False)) == "about 2m05s left"
    assert time_left(Left(30.0, at_least=True)) == "at least 30.0 s left"
    assert time_left(None) == "time left unknown until a step ends"


def test_a_count_of_one_is_singular():
    assert counted(4, "runs") == "4 runs"
    assert counted(1, "runs") == "1 run"
    assert counted(1, "measurements") == "1 measurement"
