"""Lines from a non-terminal stdin that a Ctrl-C (SIGINT/SIGTERM) always interrupts.

Why not ``sys.stdin.readline()``: CPython runs a Python signal handler only between bytecodes.
A signal that lands after the last check but before the ``read(2)`` starts (say, while the
prompt is being written) only sets a flag, and ``read`` then blocks until the next line
arrives: a script that sends Ctrl-C right after a command's answer left the runner waiting
forever (seen in CI). Here every wait is a ``select`` that also watches a signal wakeup fd
(``signal.set_wakeup_fd``), which the C-level handler writes to whenever a signal lands, so
the pending handler runs (and raises KeyboardInterrupt) instead of sleeping on the pipe.

A terminal keeps Python's ``input()`` with readline editing; a human just presses Ctrl-C again.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from collections.abc import Iterator

#: Bytes read from stdin per system call.
READ_CHUNK = 4096


@contextlib.contextmanager
def _signal_wakeup() -> Iterator[int]:
    """A non-blocking pipe that the C signal handler writes to while the block runs; yields its
    read end. The previous wakeup fd (an asyncio loop's, say) is put back afterwards."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    try:
        yield read_end
    finally:
        signal.set_wakeup_fd(previous)
        os.close(read_end)
        os.close(write_end)


class InterruptibleLines:
    """A file-like reader over a file descriptor, with what ``cmd.Cmd`` (``readline``) and
    Mininet's CLI (``fileno``, ``read(1)``) use; text is decoded as UTF-8 (errors replaced).

    Must be used from the main thread: only there can the signal wakeup fd be set.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self._eof = False

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def readline(self) -> str:
        """The next line with its newline; what is left at end of input; "" after that."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                return self._take(end + 1)
            if self._eof:
                return self._take(len(self._buffer))
            self._fill()

    def read(self, size: int = -1) -> str:
        """Up to ``size`` bytes' worth of text (all until end of input if negative); waits
        only when nothing is buffered."""
        if size < 0:
            while not self._eof:
                self._fill()
            return self._take(len(self._buffer))
        if not self._buffer and not self._eof:
            self._fill()
        return self._take(min(size, len(self._buffer)))

    def _take(self, count: int) -> str:
        chunk = bytes(self._buffer[:count])
        del self._buffer[:count]
        return chunk.decode("utf-8", errors="replace")

    def _fill(self) -> None:
        """Wait until stdin is readable or a signal lands, then read what is there. A signal's
        Python handler runs as soon as ``select`` returns (its KeyboardInterrupt propagates)."""
        with _signal_wakeup() as wakeup:
            while True:
                readable, _, _ = select.select([self._fd, wakeup], [], [])
                if wakeup in readable:
                    # The signal's handler is pending and runs on return to the interpreter;
                    # one that does not raise (SIGWINCH, say) just continues the wait.
                    with contextlib.suppress(BlockingIOError):
                        os.read(wakeup, 64)
                if self._fd in readable:
                    break
        data = os.read(self._fd, READ_CHUNK)
        if data:
            self._buffer += data
        else:
            self._eof = True
