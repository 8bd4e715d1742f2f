"""The write-ahead attempt: a child never starts before its attempt is on disk, and a takeover settles an
attempt recorded as starting by whether its child was found alive."""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import sys
from pathlib import Path

import orjson
import psutil
import pytest

from engine.execute.launcher import ForkExecLauncher
from engine.store.records import RecordStatus
from tests.backfills import hold_lock, records, release
from tests.unit.test_scheduling import prepare


@pytest.fixture
def work(tmp_path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


class CheckingLauncher(ForkExecLauncher):
    """Reads the partition's record from disk at the moment of each launch, before the child exists."""

    def __init__(self, partitions: Path) -> None:
        self.partitions, self.seen = partitions, []

    def launch(self, spec):
        environment = spec.env
        path = self.partitions / f"{environment['BACKFILL_PARTITION_ID']}.json"
        on_disk = orjson.loads(path.read_bytes()) if path.exists() else None
        attempts = {a["run_id"]: a["status"] for a in on_disk["attempts"]} if on_disk else {}
        self.seen.append(attempts.get(environment["BACKFILL_RUN_ID"]))
        return super().launch(spec)


def test_every_attempt_is_on_disk_as_starting_before_its_child_starts(work):
    """Three partitions, each failing once and retried: at each of the six launches the record on disk already
    holds that attempt, as starting; the records then end as usual."""
    marker = work / "once"
    marker.mkdir()
    prepared = prepare(work, f"{sys.executable} {Path(__file__).parents[1] / 'child.py'} --partition {{partition_id}} "
                       f"--start {{start}} --fail-first-attempt {marker}", 3, max_parallel=2, retries=1)  # fmt: skip
    launcher = CheckingLauncher(prepared.store.partitions)
    outcome = prepared.executor(launcher=launcher).run()
    assert outcome.status == "succeeded"
    assert launcher.seen == [RecordStatus.STARTING] * 6
    assert [[a["status"] for a in r["attempts"]] for r in records(prepared.store.directory)] == [
        ["failed", "succeeded"]
    ] * 3


def test_a_takeover_settles_a_starting_attempt_by_whether_its_child_lives(work, monkeypatch):
    """Two attempts an executor left starting: the one whose child is alive (found by its run ID in its
    environment) is stopped and cancelled; the other, never found, is lost saying whether it ran is unknown. Both
    partitions run again and succeed. The kernel's boot time as this process read it is a second off the one it
    reports now (the wall clock it follows stepped): the child found is still recognised."""
    from engine.base import processes
    from engine.execute.backfill import load_backfill, prepare_resume, replan
    from engine.execute.rerun import PartitionSelection

    monkeypatch.setattr(processes, "_BOOT_TIME", processes._boot_time() + 1.0)

    prepared = prepare(work, "true {start}", 2)
    prepared.release()
    store = prepared.store
    child = None
    try:
        for index in (0, 1):
            interval = prepared.spec.plan.interval(index)
            partition_id = prepared.spec.ids.of(interval.start, interval.end)
            run_id = f"{store.id}-p{index}-a1"
            record = {
                "format": 1, "id": partition_id, "index": index, "start": "", "end": "",
                "start_us": interval.start, "end_us": interval.end, "status": "running",
                "attempts": [{"run_id": run_id, "status": "starting", "started_at": "2024-01-01T00:00:00Z"}],
            }  # fmt: skip
            (store.partitions / f"{partition_id}.json").write_bytes(orjson.dumps(record))
            if index == 0:  # its child started before the executor could say so
                environment = {**os.environ, "BACKFILL_ID": store.id, "BACKFILL_RUN_ID": run_id}
                child = subprocess.Popen(["sleep", "60"], env=environment, start_new_session=True)
        loaded = load_backfill(store.id, str(work / "states"), work)
        from engine.base.settings import Settings

        resumed = prepare_resume(loaded, replan(loaded.spec, prepared.options), PartitionSelection(),
                                 settings=Settings(stop_grace=2.0))  # fmt: skip
        assert child.wait(timeout=10) is not None, "the live child was stopped"
        settled = [r["attempts"][0] for r in records(store.directory)]
        assert [a["status"] for a in settled] == ["cancelled", "lost"]
        assert settled[0]["error"] == "previous executor interrupted"
        assert (
            settled[1]["error"] == "previous executor interrupted while starting it: whether its child ran is unknown"
        )
        outcome = resumed.executor().run()
        assert outcome.status == "succeeded"
        assert [[a["status"] for a in r["attempts"]] for r in records(store.directory)] == [
            ["cancelled", "succeeded"],
            ["lost", "succeeded"],
        ]
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()


def test_a_write_ahead_never_overtakes_a_queued_write_of_the_same_record(tmp_path):
    """An older version of a record still queued: the write-ahead waits behind it, and the file ends with the newer
    version; another file's write-ahead does not wait for the queue."""
    import threading

    from engine.store.record_writer import RecordWriter

    gate, entered = threading.Event(), threading.Event()

    def may_write() -> bool:
        entered.set()
        return gate.wait(10)

    writer = RecordWriter(tmp_path, may_write)
    path, other = tmp_path / "p.json", tmp_path / "q.json"
    writer.put(path, b"old", durable=True)
    assert entered.wait(10)  # the writer holds the old version, not yet written
    done = threading.Event()
    thread = threading.Thread(target=lambda: (writer.write_ahead(path, b"new"), done.set()))
    thread.start()
    assert not done.wait(0.3), "the write-ahead overtook the queued write"
    gate.set()
    thread.join(10)
    assert done.is_set() and path.read_bytes() == b"new"
    writer.write_ahead(other, b"alone")  # nothing queued for it: written at once
    assert other.read_bytes() == b"alone"
    writer.close()


class BatchWatchingLauncher(CheckingLauncher):
    """Also counts the syncs of the records' directory made before each launch."""

    def __init__(self, partitions: Path, syncs: list[Path]) -> None:
        super().__init__(partitions)
        self.syncs, self.syncs_seen = syncs, []

    def launch(self, spec):
        self.syncs_seen.append(sum(1 for path in self.syncs if path == self.partitions))
        return super().launch(spec)


def test_the_attempts_of_a_turn_are_written_ahead_together_with_one_directory_sync(work, monkeypatch):
    """Four slots free at the start: the four attempts are on disk as starting before the first child starts
    (each launch sees its own attempt there), and the records' directory was synced once for the four."""
    from engine.base import atomic

    syncs: list[Path] = []
    real_sync = atomic.sync_directory
    monkeypatch.setattr(atomic, "sync_directory", lambda path: (syncs.append(Path(path)), real_sync(path))[1])
    prepared = prepare(work, "true {start}", 4, max_parallel=4)
    launcher = BatchWatchingLauncher(prepared.store.partitions, syncs)
    assert prepared.executor(launcher=launcher).run().status == "succeeded"
    assert launcher.seen == [RecordStatus.STARTING] * 4
    assert launcher.syncs_seen == [1, 1, 1, 1]


class FailingFirstLauncher(ForkExecLauncher):
    """The first launch cannot start its program (as a missing executable would fail); the rest are counted."""

    def __init__(self) -> None:
        self.launched = 0

    def launch(self, spec):
        self.launched += 1
        if self.launched == 1:
            raise FileNotFoundError(2, "No such file or directory")
        return super().launch(spec)


def test_a_launch_that_fails_stops_the_rest_of_its_batch_from_starting(work):
    """Three attempts written ahead together; the first cannot start and --on-failure stop halts the run: the
    other two never start, their attempts end cancelled ("not started"), and a resume would run them."""
    prepared = prepare(work, "true {start}", 3, max_parallel=3, on_failure="stop")
    launcher = FailingFirstLauncher()
    outcome = prepared.executor(launcher=launcher).run()
    assert outcome.status == "failed" and launcher.launched == 1
    attempts = [r["attempts"] for r in records(prepared.store.directory)]
    assert [[a["status"] for a in attempt] for attempt in attempts] == [["failed"], ["cancelled"], ["cancelled"]]
    assert attempts[1][0]["error"] == "not started: the run stopped starting partitions"


def test_a_childs_identity_is_read_once_and_still_finds_what_it_left_behind(work, monkeypatch):
    """Each child's start time and birth are read from /proc once, when it starts (not again at its exit), and
    what it left in its process group (``sleep 30 &``) is still found with them and stopped."""
    from engine.base import processes

    read: list[int] = []
    real = processes._stat_ticks
    monkeypatch.setattr(processes, "_stat_ticks", lambda pid: (read.append(pid), real(pid))[1])
    prepared = prepare(work, "sh -c 'sleep 30 & echo $! > {partition_id}.left'", 2, max_parallel=2)
    outcome = prepared.executor(grace=2.0).run()
    assert outcome.status == "succeeded"
    children = [a["pid"] for r in records(prepared.store.directory) for a in r["attempts"]]
    assert len(children) == 2 and [read.count(pid) for pid in children] == [1, 1]
    assert len(list(work.glob("*.left"))) == 2
    for left in work.glob("*.left"):
        pid = int(left.read_text())
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"


class FencingLauncher(ForkExecLauncher):
    """Its first launch is the moment the executor loses its lease (a reconcile fenced it): it says so from then."""

    def __init__(self) -> None:
        self.launched, self.executor = 0, None

    def launch(self, spec):
        self.launched += 1
        if self.launched == 1:
            executor = self.executor
            executor.owns = lambda: False  # from now on, as its lease says
            executor.hooks.poll = lambda _: executor._fenced_out("taken over")  # its lease thread, a turn later
        return super().launch(spec)


def test_an_executor_fenced_while_starting_a_batch_starts_none_of_the_rest(work):
    """Three attempts written ahead together; the executor is fenced while it starts the first: the other two are
    never started (a fenced executor starts nothing, even before its lease thread stops the run), and nothing more
    of this run is written for any of them."""
    prepared = prepare(work, "true {start}", 3, max_parallel=3)
    launcher = FencingLauncher()
    executor = prepared.executor(launcher=launcher)
    launcher.executor = executor
    executor.run()
    assert launcher.launched == 1
    statuses = [[a["status"] for a in r["attempts"]] for r in records(prepared.store.directory)]
    assert statuses == [["starting"]] * 3  # as written ahead, nothing after: a takeover settles them


def _left_starting(work: Path, launcher: str = "exec", earlier: tuple[dict, ...] = ()):
    """A saved backfill whose executor died between a child's start and its running record: partition 0's
    attempt is on disk as ``starting``, naming no child."""
    prepared = prepare(work, "true {start}", 2)
    prepared.release()
    store = prepared.store
    interval = prepared.spec.plan.interval(0)
    partition_id = prepared.spec.ids.of(interval.start, interval.end)
    run_id = f"{store.id}-p0-a1"
    record = {
        "format": 1, "id": partition_id, "index": 0, "start": "", "end": "",
        "start_us": interval.start, "end_us": interval.end, "status": "running",
        "attempts": [*earlier, {"run_id": run_id, "status": "starting", "started_at": "2024-01-01T00:00:00Z",
                                "launcher": launcher}],
    }  # fmt: skip
    (store.partitions / f"{partition_id}.json").write_bytes(orjson.dumps(record))
    return store, run_id


def _attempts(store) -> list[dict]:
    return [a for r in records(store.directory) for a in r["attempts"]]


def test_a_cancel_stops_the_child_of_an_attempt_left_starting(work, home):
    """`backfill cancel` after the executor was killed between a child's start and its running record: the child,
    named by no record, is found by ``BACKFILL_ID`` in its environment and stopped before the cancel says so
    (before, the cancel said "cancelled" and the child ran on)."""
    from tests.conftest import run_backfill

    store, run_id = _left_starting(work)
    environment = {**os.environ, "BACKFILL_ID": store.id, "BACKFILL_RUN_ID": run_id}
    child = subprocess.Popen(["sleep", "60"], env=environment, start_new_session=True)
    try:
        cancelled = run_backfill("cancel", store.id, "--reason", "runaway", "--state-dir", str(work / "states"),
                                 cwd=work, env=home)  # fmt: skip
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout == f"backfill {store.id} cancelled; 1 running child stopped\n"
        assert child.wait(timeout=10) == -15
    finally:
        child.kill()
        child.wait()
    # Nothing of ours runs: the records are settled now, not left running for a --continue to settle, so a mark
    # of the partition is not refused as running.
    (attempt,) = _attempts(store)
    assert (attempt["status"], attempt["error"]) == ("cancelled", f"cancelled: by {getpass.getuser()}@"
                                                     f"{socket.gethostname()}: runaway")  # fmt: skip
    assert [r["status"] for r in records(store.directory)] == ["cancelled"]
    marked = run_backfill("mark", store.id, records(store.directory)[0]["id"], "--status", "succeeded", "--reason",
                          "loaded by hand", "--state-dir", str(work / "states"), cwd=work, env=home)  # fmt: skip
    assert marked.returncode == 0, marked.stderr


@pytest.mark.parametrize("launcher", ["exec", "dask", "exec after dask"])
def test_a_cancel_settles_an_attempt_left_starting_whose_child_never_ran_unless_it_ran_on_dask(work, home, launcher):
    """No child of the attempt left ``starting`` lives: the cancel settles it ``lost`` (whether its child ran is
    unknown) and the partition cancelled. An attempt on a Dask worker stays as it is: its child may live on another
    machine, which only a takeover reaches. An earlier Dask attempt that ended (a resume ran locally) does not."""
    from tests.conftest import run_backfill

    earlier = ()
    if launcher == "exec after dask":
        launcher, earlier = "exec", ({"run_id": "r-a0", "status": "failed", "started_at": "2024-01-01T00:00:00Z",
                                      "finished_at": "2024-01-01T00:00:01Z", "launcher": "dask"},)  # fmt: skip
    store, _ = _left_starting(work, launcher, earlier)
    cancelled = run_backfill("cancel", store.id, "--reason", "runaway", "--state-dir", str(work / "states"),
                             cwd=work, env=home)  # fmt: skip
    assert cancelled.returncode == 0, cancelled.stderr
    attempt = _attempts(store)[-1]
    if launcher == "dask":
        assert cancelled.stdout == (
            f"backfill {store.id} cancelled; 1 partition ran on a Dask cluster, where its child may still run: stop "
            f"it there, or `backfill --continue {store.id}` stops it as it takes over\n"
        )
        assert attempt["status"] == "starting" and records(store.directory)[0]["status"] == "running"
        return
    assert cancelled.stdout == f"backfill {store.id} cancelled\n"
    who = f"{getpass.getuser()}@{socket.gethostname()}"
    unknown = "its executor had died while starting it: whether its child ran is unknown"
    assert (attempt["status"], attempt["error"]) == ("lost", f"cancelled: by {who}: runaway; {unknown}")
    assert records(store.directory)[0]["status"] == "cancelled"


def test_a_cancel_that_cannot_find_a_live_child_says_so_and_fails(work, home):
    """A child that cleared its environment (``env -i``) and is named by no record still holds ``.children.lock``:
    the cancel cannot find it, so it does not claim the backfill stopped. It exits 1 naming the lock and how to find
    the child, and leaves the child alone. Once the child is gone, the cancel succeeds."""
    from tests.conftest import run_backfill

    store, _ = _left_starting(work)
    child = hold_lock(store.children_lock_path, env={})
    try:
        args = ("cancel", store.id, "--reason", "runaway", "--state-dir", str(work / "states"))
        cancelled = run_backfill(*args, cwd=work, env=home)
        assert cancelled.returncode == 1, cancelled.stdout + cancelled.stderr
        assert cancelled.stderr == (
            f"backfill: error: backfill {store.id} cancelled, but a child of an earlier executor still runs and was "
            f"not found (it "
            f"holds .children.lock): find processes with BACKFILL_ID={store.id} in their environment and stop them\n"
        )
        assert child.poll() is None
        assert [a["status"] for a in _attempts(store)] == ["starting"]  # not settled while a child may run
    finally:
        release(child)
    again = run_backfill(*args, cwd=work, env=home)
    assert (again.returncode, again.stdout, again.stderr) == (0, f"backfill {store.id} cancelled\n", "")


def test_a_cancel_run_from_below_a_shell_that_exported_the_backfill_s_id_leaves_that_shell_alone(work, home):
    """`export BACKFILL_ID=…` in a shell (reproducing a child's environment), then a script that runs `backfill
    cancel`: the shell two levels up carries the ID but is the command's ancestor, never a child to stop. Before,
    the cancel stopped it ("1 running child stopped") and its caller died of SIGTERM."""
    from tests.conftest import backfill_argv

    store, _ = _left_starting(work)
    environment = {**os.environ, **home, "BACKFILL_ID": store.id, "NO_COLOR": "1"}
    script = 'sh -c \'"$@"; echo inner=$?\' sh "$@"; echo outer=$?'
    argv = [*backfill_argv(), "cancel", store.id, "--reason", "x", "--state-dir", str(work / "states")]
    shell = subprocess.run(["sh", "-c", script, "sh", *argv], cwd=work, env=environment, capture_output=True,
                           text=True, timeout=120, start_new_session=True)  # fmt: skip
    assert (shell.returncode, shell.stdout) == (0, f"backfill {store.id} cancelled\ninner=0\nouter=0\n"), shell.stderr
