"""Progress as a user reads it: the plan first, each step's start and end with its figure, the
count and the time left, a heartbeat after a silence, events at ``-v`` placed in their step,
the count at the end (and how a job that did not finish ended); nothing at all without a
display, and a live bar only where asked or on a terminal, never on standard output."""

from __future__ import annotations

import io
import logging

import pytest

from experiments.progress import Display, Step, event, track


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _plain(clock: Clock, verbose: bool = False) -> tuple[Display, io.StringIO]:
    out = io.StringIO()
    return Display(stream=out, verbose=verbose, live=False, clock=clock, tick_s=None), out


STEPS = [Step("mrc@0% seed 0", 10.0), Step("single@0% seed 0", 10.0)]


def test_plain_lines_tell_the_plan_each_step_with_its_figure_and_the_final_count() -> None:
    clock = Clock()
    display, out = _plain(clock)
    with track(display, "loss", STEPS, setups=1) as progress:
        progress.setup_began("bring-up 1 of 1")
        clock.now = 20.0
        progress.setup_ready("fabric up")
        progress.step_began(0)
        clock.now = 32.0
        progress.step_ended(0, "goodput 812.345 Mbit/s")
        progress.step_began(1)
        clock.now = 44.0
        progress.step_ended(1, "goodput 0.000 Mbit/s, FAILED 1 of 1: retries exhausted")
        progress.setup_ended("torn down: nothing left")
    assert out.getvalue().splitlines() == [
        "loss: 2 runs in 1 bring-up(s); at least 20.0 s left",
        "loss [1/2] mrc@0% seed 0: started",
        "loss [1/2] mrc@0% seed 0: done in 12.0 s, goodput 812.345 Mbit/s; 1 of 2 done, "
        "about 12.0 s left",
        "loss [2/2] single@0% seed 0: started",
        "loss [2/2] single@0% seed 0: done in 12.0 s, goodput 0.000 Mbit/s, FAILED 1 of 1: "
        "retries exhausted; 2 of 2 done, about 0.0 s left",
        "loss: 2 of 2 runs done in 44.0 s",
    ]


def test_a_silence_as_long_as_the_heartbeat_brings_a_line_saying_what_goes_on() -> None:
    clock = Clock()
    display, out = _plain(clock)
    with track(display, "collective", [Step("mrc-clean seed 0")], setups=1) as progress:
        progress.setup_began("bring-up 1 of 1: topology.yaml on linux")
        clock.now = 29.0
        progress.tick()  # not yet
        clock.now = 30.0
        progress.tick()
        progress.tick()  # the heartbeat itself was a line: no second one at once
        progress.setup_ready("fabric up")
        progress.step_began(0)
        clock.now = 95.0
        progress.tick()
    lines = out.getvalue().splitlines()
    assert lines[1:4] == [
        "collective bring-up 1 of 1: topology.yaml on linux: still going, 30.0 s in; "
        "0 of 1 done, time left unknown until a step ends",
        "collective [1/1] mrc-clean seed 0: started",
        "collective [1/1] mrc-clean seed 0: still going, 1m05s in; 0 of 1 done, "
        "time left unknown until a step ends",
    ]


def test_events_show_at_verbose_in_the_step_they_came_in_and_not_otherwise() -> None:
    for verbose in (True, False):
        clock = Clock()
        display, out = _plain(clock, verbose=verbose)
        with track(display, "failover", [Step("mrc-static-remote seed 0", 8.0)]) as progress:
            progress.step_began(0)
            clock.now = 3.25
            event("%s cut", "s1:3-l2:1")
            progress.step_ended(0, "back to 90 % 0.40 s after the cut")
            event("between runs")
        events = [
            line for line in out.getvalue().splitlines() if "cut" in line or "between" in line
        ]
        expected = [
            "failover [1/1] mrc-static-remote seed 0 +3.2 s: s1:3-l2:1 cut",
            "failover: between runs",
        ]
        assert [line for line in events if "done in" not in line] == (expected if verbose else [])


def test_events_go_back_to_the_root_logger_once_the_progress_is_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    display, out = _plain(Clock(), verbose=True)
    with track(display, "loss", STEPS):
        pass
    with caplog.at_level(logging.INFO):
        event("after the job")
    assert "after the job" not in out.getvalue()
    assert [record.getMessage() for record in caplog.records] == ["after the job"]


@pytest.mark.parametrize(
    ("error", "ending"),
    [(KeyboardInterrupt, "interrupted"), (RuntimeError, "stopped by RuntimeError")],
)
def test_a_job_that_does_not_finish_says_how_it_ended_and_how_far_it_got(
    error: type[BaseException], ending: str
) -> None:
    clock = Clock()
    display, out = _plain(clock)
    with pytest.raises(error), track(display, "loss", STEPS) as progress:
        progress.step_began(0)
        clock.now = 11.0
        progress.step_ended(0, "goodput 1.000 Mbit/s")
        raise error
    assert out.getvalue().splitlines()[-1] == f"loss: {ending} after 1 of 2 runs in 11.0 s"


def test_without_a_display_nothing_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    with track(None, "loss", STEPS, setups=1) as progress:
        progress.setup_began("bring-up")
        progress.step_began(0)
        event("a cut")
        progress.step_ended(0, "goodput 1.000 Mbit/s")
        progress.tick()
    assert capsys.readouterr() == ("", "")


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_live_bar_is_drawn_and_the_lines_scroll_above_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    terminal = Terminal()
    clock = Clock()
    display = Display(stream=terminal, clock=clock, tick_s=None)
    handler = logging.StreamHandler(terminal)
    logging.getLogger().addHandler(handler)
    try:
        with track(display, "bench-api", STEPS, unit="measurements") as progress:
            progress.step_began(0)
            progress.tick()
            clock.now = 5.0
            progress.step_ended(0, "goodput 1.000 Mbit/s")
            assert handler.stream is not terminal  # -v's log lines go through the bar
    finally:
        logging.getLogger().removeHandler(handler)
    assert handler.stream is terminal
    drawn = terminal.getvalue()
    assert "\x1b[" in drawn  # the bar's cursor moves: a live display, not plain lines
    assert "bench-api [1/2] mrc@0% seed 0: done in 5.0 s, goodput 1.000 Mbit/s" in drawn
    assert "bench-api: 1 of 2 measurements done" not in drawn
    assert "bench-api: stopped after 1 of 2 measurements in 5.0 s" in drawn
    assert capsys.readouterr().out == ""


def test_a_stream_that_is_no_terminal_gets_plain_lines_without_being_asked() -> None:
    out = io.StringIO()
    with track(Display(stream=out, tick_s=None), "loss", STEPS[:1]) as progress:
        progress.step_began(0)
        progress.step_ended(0, "goodput 1.000 Mbit/s")
    assert "\x1b" not in out.getvalue()
    assert out.getvalue().splitlines()[-1].startswith("loss: 1 of 1 run done in ")


class ClosedPipe(io.StringIO):
    """A stream whose reader has gone (``| head`` after its lines)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_stream_whose_reader_has_gone_never_stops_the_job() -> None:
    display = Display(stream=ClosedPipe(), live=False, tick_s=None)
    with track(display, "loss", STEPS) as progress:
        progress.step_began(0)
        progress.step_ended(0, "goodput 1.000 Mbit/s")
        progress.step_began(1)
    assert progress.estimate.done == 1  # no BrokenPipeError came out, and the job went on
