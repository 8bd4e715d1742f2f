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


def test_the_watcher_is_a_daemon_thread_named_stop_watch():
    """While the call runs, a daemon thread named ``stop-watch`` reads the wakeup descriptor (a stuck call never
    keeps the interpreter from exiting, and a thread dump says what it is); it is gone once the call returns."""

    def call():
        return [(t.name, t.daemon) for t in threading.enumerate() if t is not threading.current_thread()]

    assert ("stop-watch", True) in interruptible(call, lambda: None)
    assert "stop-watch" not in [t.name for t in threading.enumerate()]


def test_the_installed_handler_gets_the_signal_s_frame():
    """The handler installed before is called as the interpreter would call it: the signal and a frame."""
    received = []

    def handler(signum, frame):
        received.append((signum, frame))

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        interruptible(lambda: signal.raise_signal(signal.SIGTERM), lambda: None)
    finally:
        signal.signal(signal.SIGTERM, previous)
    [(signum, frame)] = received
    assert signum == signal.SIGTERM and frame is not None and frame.f_code.co_name


def test_under_the_default_action_the_signal_ends_the_process_once_the_call_has_ended():
    """SIGTERM with no handler (its default action): the process dies of SIGTERM after the call, as it would have
    without ``interruptible`` — not later, not with a different end (a forked copy of this process is signalled)."""
    pid = os.fork()
    if pid == 0:  # the child: nothing of pytest's may run here
        code = 3
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            interruptible(lambda: signal.raise_signal(signal.SIGTERM), lambda: None)
            code = 0  # the signal was lost
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, status


def test_a_failure_before_the_call_puts_everything_back(monkeypatch):
    """A watcher thread that cannot start (no thread left to the process): that error reaches the caller (it was
    hidden by ``join``'s own), the call never runs, and the handlers, the wakeup descriptor and the open
    descriptors are as they were."""
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    descriptors = sorted(os.listdir("/proc/self/fd"))

    def refuse(_thread):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    ran = []
    with pytest.raises(RuntimeError, match="can't start new thread"):
        interruptible(lambda: ran.append(True), lambda: None)
    monkeypatch.undo()
    assert not ran
    assert {signum: signal.getsignal(signum) for signum in before} == before
    assert signal.set_wakeup_fd(-1) == -1
    assert sorted(os.listdir("/proc/self/fd")) == descriptors
