"""tfrecorder.core.deferred_interrupts: a Ctrl-C during the block lets it finish, then raises; the caller's
SIGINT handler is back afterwards."""
from __future__ import annotations

import os
import signal
import threading

import pytest

from tfrecorder.core.deferred_interrupts import deferred_interrupts


def test_a_sigint_inside_the_block_is_raised_once_the_block_is_done():
    before = signal.getsignal(signal.SIGINT)
    finished = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupts():
            os.kill(os.getpid(), signal.SIGINT)
            finished.append("after the signal")  # the block was not interrupted
    assert finished == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is before


def test_without_a_signal_nothing_is_raised_and_the_handler_is_back():
    before = signal.getsignal(signal.SIGINT)
    with deferred_interrupts():
        pass
    assert signal.getsignal(signal.SIGINT) is before


def test_outside_the_main_thread_the_block_just_runs():
    ran = []

    def block():
        with deferred_interrupts():
            ran.append(threading.current_thread().name)

    worker = threading.Thread(target=block, name="worker")
    worker.start()
    worker.join()
    assert ran == ["worker"]
