"""engine/base/interruptible.py: a blocking call a stop signal ends, in-process with real signals and a real
DuckDB query."""

from __future__ import annotations

import os
import signal
import threading
import time

import duckdb
import pytest

from engine.base.interruptible import interruptible

# Minutes of both cores for DuckDB: only a signal ends it within the test.
ENDLESS = "SELECT sum(hash(range) % 7) FROM range(1000000000000)"


@pytest.fixture
def cursor():
    connection = duckdb.connect()
    yield connection.cursor()
    connection.close()


def signalled_query(signum: int, cursor, sql: str = ENDLESS):
    """A call running an endless query, signalled once the query is seen running (this process's CPU time grows by
    half a second: DuckDB at work), so that the signal arrives while DuckDB, not Python, runs."""

    def call():
        start = time.process_time()

        def signal_when_running() -> None:
            while time.process_time() < start + 0.5:
                time.sleep(0.01)  # polling the event (CPU spent by the query), not a guess at a duration
            os.kill(os.getpid(), signum)

        threading.Thread(target=signal_when_running, daemon=True).start()
        return cursor.execute(sql).fetchone()

    return call


def test_a_call_s_value_and_its_error_reach_the_caller():
    """Nothing interrupted: the call's value is returned and its exception raised, as a plain call."""
    assert interruptible(lambda: 42, lambda: None) == 42
    with pytest.raises(ZeroDivisionError):
        interruptible(lambda: 1 / 0, lambda: None)


def test_ctrl_c_during_a_query_is_a_keyboard_interrupt_not_an_error_of_the_query(cursor):
    """Plain, DuckDB turned Ctrl+C into an error of its query (which the pre-flight took for a check it could not
    decide: tests/functional/test_stop_during_preflight.py); through ``interruptible`` the query is interrupted
    and KeyboardInterrupt raised, handlers and the wakeup descriptor put back."""
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with pytest.raises(KeyboardInterrupt):
        interruptible(signalled_query(signal.SIGINT, cursor), cursor.interrupt)
    assert {signum: signal.getsignal(signum) for signum in before} == before
    assert signal.set_wakeup_fd(-1) == -1


def test_a_signal_goes_to_the_handler_that_was_installed_once(cursor):
    """SIGTERM under the command's own handler (it raises as Ctrl+C does): DuckDB alone would run the query to its
    end; the query is interrupted and the handler called once, with SIGTERM. A handler that only notes the signal
    lets the query's error go on."""
    calls = []

    def stop_as_interrupt(signum, _frame):
        calls.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop_as_interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            interruptible(signalled_query(signal.SIGTERM, cursor), cursor.interrupt)
        assert calls == [signal.SIGTERM]
        signal.signal(signal.SIGTERM, lambda signum, _frame: calls.append(signum))
        with pytest.raises(duckdb.InterruptException):
            interruptible(signalled_query(signal.SIGTERM, cursor), cursor.interrupt)
        assert calls == [signal.SIGTERM, signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_an_ignored_signal_stays_ignored(cursor):
    """Under nohup (SIGHUP ignored) a closed terminal is meant not to stop anything: a query of some seconds that
    gets SIGHUP while it runs goes on to its result."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        query = signalled_query(
            signal.SIGHUP, cursor, sql="SELECT count(*) FROM range(1000000000) WHERE hash(range) >= 0"
        )
        assert interruptible(query, cursor.interrupt) == (1_000_000_000,)
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_off_the_main_thread_it_is_a_plain_call():
    """A worker thread never receives signals (and cannot install handlers): the call simply runs there."""
    found = []
    worker = threading.Thread(target=lambda: found.append(interruptible(threading.current_thread, lambda: None)))
    worker.start()
    worker.join()
    assert found == [worker]
