"""engine/base/interruptible.py: a blocking call a stop signal ends, in-process with real signals."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from engine.base.interruptible import interruptible


def test_a_call_s_value_and_its_error_reach_the_caller():
    """Nothing interrupted: the call's value is returned and its exception raised, as a plain call."""
    assert interruptible(lambda: 42, lambda: None) == 42
    with pytest.raises(ZeroDivisionError):
        interruptible(lambda: 1 / 0, lambda: None)


def test_a_signal_during_the_call_interrupts_it_and_is_raised_once_it_ended():
    """SIGINT while the call blocks: ``interrupt`` is called, the call is let finish (never abandoned mid-query),
    and the KeyboardInterrupt is raised after it; a second SIGINT while it winds down changes nothing."""
    release, events = threading.Event(), []

    def call() -> str:
        events.append("started")
        os.kill(os.getpid(), signal.SIGINT)
        release.wait()
        events.append("ended")
        return "value"

    def interrupt() -> None:
        events.append("interrupted")
        os.kill(os.getpid(), signal.SIGINT)  # pressed again while the call winds down
        threading.Timer(0.05, release.set).start()  # the query notices its interrupt a moment later

    with pytest.raises(KeyboardInterrupt):
        interruptible(call, interrupt)
    assert events == ["started", "interrupted", "ended"]


def test_off_the_main_thread_it_is_a_plain_call():
    """A worker thread never receives signals: the call runs there, on that thread."""
    threads = []
    worker = threading.Thread(target=lambda: threads.append(interruptible(threading.current_thread, lambda: None)))
    worker.start()
    worker.join()
    assert threads == [worker]
