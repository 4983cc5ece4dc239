"""``terminate_on_signals``: Ctrl-C, SIGTERM and SIGHUP unwind a ``with`` block, whatever
disposition the process inherited, and the previous handlers come back afterwards."""

from __future__ import annotations

import os
import signal

import pytest

from hostenv.netns import terminate_on_signals


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_an_inherited_ignore_does_not_keep_the_block_from_unwinding(signum: int) -> None:
    previous = signal.signal(signum, signal.SIG_IGN)  # as a script's background job inherits it
    try:
        with pytest.raises(KeyboardInterrupt), terminate_on_signals():
            os.kill(os.getpid(), signum)
        assert signal.getsignal(signum) is signal.SIG_IGN
    finally:
        signal.signal(signum, previous)
