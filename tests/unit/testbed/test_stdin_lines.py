"""The testbed CLI's stdin reader: lines as a script sends them, and a Ctrl-C that is never
lost, even one whose handler is still pending when the wait for input begins."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

import pytest

from testbed.stdin_lines import InterruptibleLines

#: If the reader misses the signal, this much later a line arrives and ends the wait, so a
#: broken reader fails the test instead of hanging it.
RESCUE_AFTER_S = 10.0


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    yield read_end, write_end
    for fd in (read_end, write_end):
        with contextlib.suppress(OSError):
            os.close(fd)


def test_lines_come_one_by_one_whatever_the_chunks_they_were_written_in(
    pipe: tuple[int, int],
) -> None:
    read_end, write_end = pipe
    os.write(write_end, b"fail l1 s1\nrestore l1 s1\nmrc h1")
    reader = InterruptibleLines(read_end)
    assert reader.readline() == "fail l1 s1\n"
    assert reader.readline() == "restore l1 s1\n"
    os.write(write_end, " h3 — ok\n".encode())
    assert reader.readline() == "mrc h1 h3 — ok\n"


def test_end_of_input_gives_the_unterminated_rest_then_empty_lines(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    os.write(write_end, b"status\nexit")
    os.close(write_end)
    reader = InterruptibleLines(read_end)
    assert [reader.readline() for _ in range(4)] == ["status\n", "exit", "", ""]


def test_read_serves_keystrokes_from_what_is_buffered_first(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    os.write(write_end, b"ab\ncd")
    reader = InterruptibleLines(read_end)
    assert reader.read(1) == "a"
    assert reader.readline() == "b\n"
    os.close(write_end)
    assert reader.read() == "cd"
    assert reader.fileno() == read_end


def _signal_handled_in_a_side_thread(signum: int) -> None:
    """Deliver ``signum`` to a thread other than the main one: its C-level handler runs there,
    and the Python handler stays pending for the main thread: the state a signal landing just
    before ``read(2)`` leaves behind."""
    side = threading.Thread(target=lambda: signal.pthread_kill(threading.get_ident(), signum))
    side.start()
    side.join()


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """Python's own SIGINT handler for the test: a process started in the background by a
    shell inherits SIGINT ignored, and then no KeyboardInterrupt would ever come."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("ctrl_c_raises")
def test_a_ctrl_c_pending_while_waiting_for_input_interrupts_the_wait(
    pipe: tuple[int, int],
) -> None:
    read_end, write_end = pipe
    reader = InterruptibleLines(read_end)
    rescued: list[bool] = []

    def rescue_the_wait() -> None:
        rescued.append(True)
        os.write(write_end, b"too late\n")

    interrupter = threading.Timer(0.2, _signal_handled_in_a_side_thread, (signal.SIGINT,))
    rescue = threading.Timer(RESCUE_AFTER_S, rescue_the_wait)
    interrupter.start()
    rescue.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            reader.readline()
    finally:
        interrupter.cancel()
        rescue.cancel()
        rescue.join()
    # A reader that slept through the signal raises too, but only once the rescue line ended
    # its wait.
    assert not rescued, "the Ctrl-C was only noticed when the next line arrived"


def test_a_signal_whose_handler_returns_does_not_end_the_wait(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    seen: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, _frame: seen.append(signum))
    reader = InterruptibleLines(read_end)
    interrupter = threading.Timer(0.1, _signal_handled_in_a_side_thread, (signal.SIGUSR1,))
    writer = threading.Timer(0.5, os.write, (write_end, b"status\n"))
    interrupter.start()
    writer.start()
    try:
        assert reader.readline() == "status\n"
        assert seen == [signal.SIGUSR1]
    finally:
        writer.join()
        interrupter.join()
        signal.signal(signal.SIGUSR1, previous)


def test_the_previous_signal_wakeup_fd_is_put_back(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    os.write(write_end, b"x\n")
    before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before)
    InterruptibleLines(read_end).readline()
    assert signal.set_wakeup_fd(before) == before
