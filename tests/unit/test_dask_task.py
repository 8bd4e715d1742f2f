"""What runs on a Dask worker for one attempt (``engine/execute/dask_task.py``), on an in-process cluster (worker
threads in this process) with real children: the events an attempt sends, the files it is given, a task run
twice, a generation fenced off, the heartbeat's silence, and the signals a takeover sends through ``client.run``."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

pytest.importorskip("distributed")

from distributed import Client, LocalCluster, Variable

from engine.base.processes import alive, process_identity
from engine.execute import dask_task
from engine.execute.dask_launcher import allowed_failures
from engine.execute.dask_task import FENCED, RAN_ALREADY, run_child

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def client():
    """Three one-thread workers in this process: the task's own code runs here, where mutation testing sees it. Its
    HTTP server on a free port: another cluster of the suite may hold Dask's default one."""
    cluster = LocalCluster(
        n_workers=3, threads_per_worker=1, processes=False, dashboard_address=":0", silence_logs=logging.ERROR
    )
    with Client(cluster, set_as_default=False) as connected:
        yield connected
    cluster.close()


@pytest.fixture(autouse=True)
def no_child_left():
    """Whatever a test (or a mutant) leaves, its children's groups are killed and reaped."""
    yield
    for process in psutil.Process().children():
        with contextlib.suppress(OSError):
            if os.getsid(process.pid) == process.pid:  # an attempt's child leads a session of its own
                os.killpg(process.pid, signal.SIGKILL)
                os.waitpid(process.pid, 0)


RUN = iter(range(1_000_000))


def backfill(name: str) -> str:
    """A backfill ID of its own: the fences a takeover leaves are this process's (the module's registry), and must
    not meet a second run of these tests in one process (as a mutation run's are)."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def attempt(client, argv, tmp_path, *, backfill_id="bf", generation=1, beat="", silence=60.0, grace=2.0, **kwargs):
    """Run one attempt's task on the cluster: its exit status and the events it sent on its topic, in order."""
    run_id = f"{backfill_id}-p0-a{next(RUN)}"
    topic = f"topic-{run_id}"
    env = {"PATH": os.environ["PATH"]}
    future = client.submit(run_child, argv, str(tmp_path), env, run_id, topic, beat or f"beat-{run_id}", grace,
                           silence, backfill_id, generation, pure=False, **kwargs)  # fmt: skip
    code = future.result(timeout=90)
    events = [message for _, message in client.get_events(topic)]
    assert all(event["run_id"] == run_id for event in events)
    return code, events


def quick_kinds(events: list[dict]) -> list[str]:
    """The kinds of a short child's events. On a machine busy enough for the child to outlive the quiet start, a
    start event comes first: it is left out, so that only the order that must hold is compared."""
    kinds = [event["kind"] for event in events]
    return kinds[1:] if kinds[:1] == ["started"] else kinds


def test_a_short_child_is_reported_once_with_its_exit_and_identity(client, tmp_path):
    """A child that ends at once: its output in order, then one exit event with its code, the number of output
    chunks, and who it was: PID (its own group), host, worker, start time and birth."""
    code, events = attempt(client, ["sh", "-c", "echo one; echo two >&2; exit 3"], tmp_path)
    assert code == 3
    logs = [event for event in events if event["kind"] == "log"]
    assert b"".join(event["data"] for event in logs) == b"one\ntwo\n"
    assert [event["seq"] for event in logs] == list(range(len(logs)))
    *_, end = events
    assert quick_kinds(events) == ["log"] * len(logs) + ["exit"]
    assert (end["code"], end["chunks"]) == (3, len(logs))
    assert end["pgid"] == end["pid"] and end["host"] == socket.gethostname()
    assert end["worker"] in client.scheduler_info()["workers"]
    assert isinstance(end["pid_started"], float) and end["pid_birth"]
    with pytest.raises(psutil.NoSuchProcess):
        psutil.Process(end["pid"]).status()
    assert not dask_task._CHILDREN  # the worker's registry of running children keeps no ended one


def test_what_a_child_left_in_its_group_is_stopped_when_it_ends(client, tmp_path):
    """``sleep 600 &`` left behind in the child's group: found before the child is reaped, stopped, and waited for;
    the attempt ends with the child's code and its output whole, though the sleep held it open."""
    left = tmp_path / "left"
    code, events = attempt(client, ["sh", "-c", f"sleep 600 & echo $! > {left}; echo done"], tmp_path)
    assert code == 0 and b"".join(e["data"] for e in events if e["kind"] == "log") == b"done\n"
    assert not alive(int(left.read_text()))  # gone, or a zombie its new parent has yet to reap


def test_a_child_still_running_after_a_moment_is_reported_started_with_its_identity(client, tmp_path):
    """A child that outlives the quiet start is announced while it runs (what a takeover needs to stop it), with
    the identity its exit then repeats; killed by a signal, its status is that signal, negative."""
    code, events = attempt(client, ["sh", "-c", "sleep 0.3; kill -TERM $$"], tmp_path)
    assert code == -signal.SIGTERM
    started, end = events
    assert (started["kind"], end["kind"]) == ("started", "exit")
    assert {k: started[k] for k in ("pid", "pgid", "host", "worker", "pid_started", "pid_birth")} == {
        k: end[k] for k in ("pid", "pgid", "host", "worker", "pid_started", "pid_birth")
    }
    assert end["chunks"] == 0


def test_without_a_pidfd_an_attempt_still_ends_with_its_child(client, tmp_path, monkeypatch):
    """A kernel without pidfds: the exit is waited for by polling, the attempt ends with its code, its output
    whole, and its quiet start and late start still told apart."""

    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    code, events = attempt(client, ["sh", "-c", "echo quick; exit 4"], tmp_path)
    assert code == 4 and quick_kinds(events) == ["log", "exit"] and events[-2]["data"] == b"quick\n"
    code, events = attempt(client, ["sh", "-c", "sleep 0.3; echo late"], tmp_path)
    assert code == 0 and [e["kind"] for e in events] == ["started", "log", "exit"]


def test_a_child_that_cannot_start_is_reported_with_127_and_the_reason(client, tmp_path):
    """A program that is not there: no child, one start_failed event naming why, status 127; the given files'
    copies are removed."""
    before = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("backfill-given-*"))
    code, events = attempt(client, ["/no/such/program", "--judged", "x"], tmp_path, given={"--judged": b"{}"})
    assert code == 127
    [event] = events
    assert (event["kind"], event["code"]) == ("start_failed", 127)
    assert event["error"] == "No such file or directory"
    # Only new copies count: a test of another xdist worker may remove its own meanwhile (this compared the whole
    # set, and failed when one did).
    assert set(Path(os.environ.get("TMPDIR", "/tmp")).glob("backfill-given-*")) - before == set()


def test_a_given_file_reaches_the_child_as_a_file_of_the_worker_and_is_removed_after(client, tmp_path):
    """``given``: the value of the flag is replaced by a file of this worker's holding the executor's bytes; the
    child reads it there, and it is gone once the child ended."""
    script = "import sys; path = sys.argv[sys.argv.index('--judged') + 1]; print(path); print(open(path).read())"
    code, events = attempt(client, [sys.executable, "-c", script, "--judged", "/executor/only.json"], tmp_path,
                           given={"--judged": b'{"sql": 1}'})  # fmt: skip
    assert code == 0
    output = b"".join(event["data"] for event in events if event["kind"] == "log").decode().splitlines()
    assert output[1] == '{"sql": 1}'
    assert output[0] != "/executor/only.json" and Path(output[0]).name.startswith("backfill-given-")
    assert Path(output[0]).suffix == ".json" and not Path(output[0]).exists()


def test_a_task_run_again_for_a_run_id_starts_no_second_child_until_its_claims_are_forgotten(client, tmp_path):
    """The scheduler running an attempt's task again (a result lost with its worker) starts no child: status
    RAN_ALREADY and a start_failed event saying why. Claims are per backfill, and dropped once its executor is
    done with the cluster."""
    ledger = tmp_path / "ran"
    argv = ["sh", "-c", f"echo ran >> {ledger}"]
    env = {"PATH": os.environ["PATH"]}
    args = (argv, str(tmp_path), env, "bf-claimed-a1", "topic-claimed", "beat-claimed", 2.0, 60.0)
    claims = backfill("claims")
    assert client.submit(run_child, *args, claims, 1, pure=False).result(timeout=60) == 0
    assert client.submit(run_child, *args, claims, 1, pure=False).result(timeout=60) == RAN_ALREADY
    refused = [m for _, m in client.get_events("topic-claimed") if m["kind"] == "start_failed"]
    why = "this attempt's child already ran: the scheduler ran its task again after a worker was lost"
    assert [(m["run_id"], m["code"], m["error"]) for m in refused] == [("bf-claimed-a1", RAN_ALREADY, why)]
    assert client.submit(run_child, *args, backfill("another"), 1, pure=False).result(timeout=60) == 0
    dask_task.forget_claims(client, claims)
    assert client.submit(run_child, *args, claims, 1, pure=False).result(timeout=60) == 0
    assert ledger.read_text() == "ran\n" * 3


def test_a_fenced_generation_starts_no_child_and_the_newer_one_does(client, tmp_path):
    """Once a takeover fenced generations below 3 off, a task of generation 2 starts nothing (FENCED, the reason in
    its event); generation 3 runs; other backfills are not fenced."""
    fenced = backfill("fenced")
    client.run(dask_task.stop_generation, fenced, 3, signal.SIGTERM)
    code, events = attempt(client, ["true"], tmp_path, backfill_id=fenced, generation=2)
    assert code == FENCED
    [event] = events
    assert (event["kind"], event["code"]) == ("start_failed", FENCED)
    assert event["error"] == "a newer executor of this backfill took it over before its child started"
    assert attempt(client, ["true"], tmp_path, backfill_id=fenced, generation=3)[0] == 0
    client.run(dask_task.stop_generation, fenced, 2, signal.SIGTERM)  # an older takeover's sweep, late
    assert attempt(client, ["true"], tmp_path, backfill_id=fenced, generation=2)[0] == FENCED  # the fence holds
    assert attempt(client, ["true"], tmp_path, backfill_id=backfill("unfenced"), generation=1)[0] == 0


def test_a_worker_that_missed_the_takeover_s_sweep_starts_no_child_of_a_fenced_generation(client, tmp_path):
    """A takeover raises its fence on the scheduler first: a task of an older generation that runs on a worker the
    sweep never reached (one that joined after it: here, no worker was swept) starts nothing (FENCED); the newer
    generation runs. The workers' own fences alone let it start its child beside the new executor's."""
    fenced = backfill("joined-late")
    dask_task.raise_fence(client, fenced, 4)
    code, events = attempt(client, ["true"], tmp_path, backfill_id=fenced, generation=3)
    assert code == FENCED
    assert [(e["kind"], e["code"]) for e in events] == [("start_failed", FENCED)]
    dask_task.raise_fence(client, fenced, 2)  # an older takeover's, late: the fence only rises
    assert attempt(client, ["true"], tmp_path, backfill_id=fenced, generation=3)[0] == FENCED
    assert attempt(client, ["true"], tmp_path, backfill_id=fenced, generation=4)[0] == 0


def test_an_unnamed_backfill_is_fenced_on_the_scheduler_too(client, tmp_path):
    """An older executor's backfill without an ID is fenced under the same name its claims take."""
    dask_task.raise_fence(client, "", 3)
    try:
        assert attempt(client, ["true"], tmp_path, backfill_id="", generation=2)[0] == FENCED
    finally:  # lowered again by hand: the module's other tests run unnamed attempts of generation 1
        client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.set_metadata(["backfill", "-", "fence"], 0))
    assert attempt(client, ["true"], tmp_path, backfill_id="", generation=2)[0] == 0


def test_a_takeover_fences_the_scheduler_for_the_workers_that_join_after_its_sweep(client, tmp_path):
    """A takeover on a scheduler (``stop_remote_attempts``) raises the fence there, not only on the workers it
    swept: with the workers' fences gone (as a worker that joins later has none), an older generation's task still
    starts nothing."""
    from engine.execute.dask_launcher import stop_remote_attempts
    from engine.store.state_store import Generation

    owner = backfill("swept")
    previous = Generation(2, os.getpid(), 0.0, "here", "", cluster=client.scheduler.address, cluster_grace=1.0)
    assert stop_remote_attempts(owner, [], previous, 1.0) == []
    client.run(lambda: dask_task._FENCES.clear())  # every worker now as one that joined after the sweep
    assert attempt(client, ["true"], tmp_path, backfill_id=owner, generation=2)[0] == FENCED
    assert attempt(client, ["true"], tmp_path, backfill_id=owner, generation=3)[0] == 0


def test_a_takeover_stops_the_older_generations_running_children_only(client, tmp_path):
    """``stop_generation`` signals the running children of this backfill's older generations and names the groups
    still alive; a newer generation's child and another backfill's are not touched."""
    marks = {name: tmp_path / name for name in ("old", "new", "other")}
    futures = {}
    takeover, elsewhere = backfill("takeover"), backfill("elsewhere")
    for name, owner, generation in (("old", takeover, 1), ("new", takeover, 5), ("other", elsewhere, 1)):
        argv = ["sh", "-c", f"trap 'echo stopped > {marks[name]}; exit 7' TERM; echo up > {marks[name]}; "
                "while :; do sleep 0.05; done"]  # fmt: skip
        env = {"PATH": os.environ["PATH"]}
        futures[name] = client.submit(run_child, argv, str(tmp_path), env, f"{name}-a1", f"topic-{name}", "beat-x",
                                      2.0, 60.0, owner, generation, pure=False)  # fmt: skip
    deadline = time.monotonic() + 60
    while not all(path.exists() for path in marks.values()) or not started_pids(client, "topic-old"):
        assert time.monotonic() < deadline, "the children did not start"
        time.sleep(0.05)
    [old] = started_pids(client, "topic-old")
    alive = client.run(dask_task.stop_generation, takeover, 5, signal.SIGTERM)
    assert futures["old"].result(timeout=60) == 7
    assert marks["old"].read_text() == "stopped\n"
    assert set().union(*map(set, alive.values())) <= {old}  # alive just after the signal, at most
    for name in ("new", "other"):
        assert marks[name].read_text() == "up\n" and not futures[name].done()
    for name in ("new", "other"):  # ended by the test: its own run IDs
        client.run(dask_task.stop_generation, takeover if name == "new" else elsewhere, 99, signal.SIGTERM)
        assert futures[name].result(timeout=60) == 7


def started_pids(client, topic: str) -> list[int]:
    return [message["pid"] for _, message in client.get_events(topic) if message["kind"] == "started"]


def test_a_silent_executor_gets_its_child_stopped_and_killed_after_the_grace(client, tmp_path):
    """The executor's heartbeat stops changing: after ``silence`` seconds the child's group gets SIGTERM, and one
    that ignores it SIGKILL after the grace; a beating heartbeat leaves the child alone."""
    beat = "beat-silent"
    Variable(beat, client=client).set(time.time())
    started = time.monotonic()
    code, events = attempt(client, ["sh", "-c", "trap '' TERM; sleep 30"], tmp_path, beat=beat, silence=1.0,
                           grace=1.0)  # fmt: skip
    assert code == -signal.SIGKILL and time.monotonic() - started < 20
    assert [event["kind"] for event in events] == ["started", "exit"]
    # SIGTERM first: a child whose own handler takes a second to finish is given the grace to, not killed.
    polite = attempt(client, ["sh", "-c", "trap 'sleep 1; exit 9' TERM; while :; do sleep 0.05; done"], tmp_path,
                     beat=beat, silence=1.0, grace=30.0)  # fmt: skip
    assert polite[0] == 9


def test_a_beating_heartbeat_leaves_a_long_child_alone(client, tmp_path):
    """While the executor's heartbeat changes every 0.2 s, a child running well past the silence is never
    signalled and ends with its own code."""
    beat = f"beat-{uuid.uuid4().hex[:8]}"
    variable = Variable(beat, client=client)
    variable.set(time.time())
    stop = threading.Event()

    def beating() -> None:
        while not stop.wait(0.2):
            variable.set(time.time())

    thread = threading.Thread(target=beating, daemon=True)
    thread.start()
    try:
        code, events = attempt(client, ["sh", "-c", "sleep 3.5; exit 5"], tmp_path, beat=beat, silence=2.0, grace=1.0)
    finally:
        stop.set()
        thread.join()
    assert code == 5 and [event["kind"] for event in events] == ["started", "exit"]


def test_an_executor_that_never_beat_gets_its_child_stopped(client, tmp_path):
    """No heartbeat at all (the executor died before its first, or the variable is gone): silence from the child's
    start, so the child is stopped."""
    code, _ = attempt(client, ["sh", "-c", "sleep 30"], tmp_path, beat=f"never-{uuid.uuid4().hex[:8]}", silence=1.0,
                      grace=30.0)  # fmt: skip
    assert code == -signal.SIGTERM


def test_output_in_several_chunks_is_numbered_and_counted(client, tmp_path):
    """Output that arrives in pieces is sent as numbered chunks, and the exit says how many (the executor writes
    that many before the log is whole)."""
    code, events = attempt(client, ["sh", "-c", "echo a; sleep 0.2; echo b; sleep 0.2; echo c"], tmp_path)
    logs = [event for event in events if event["kind"] == "log"]
    assert code == 0 and [event["seq"] for event in logs] == [0, 1, 2]
    assert [event["data"] for event in logs] == [b"a\n", b"b\n", b"c\n"] and events[-1]["chunks"] == 3


def test_a_child_that_removes_its_given_file_itself_still_ends_its_attempt(client, tmp_path):
    """A child cleaning up the temporary file it was given: the task's own removal finds nothing and the attempt
    ends with the child's code."""
    script = "import os, sys; os.unlink(sys.argv[sys.argv.index('--judged') + 1]); sys.exit(6)"
    code, _ = attempt(client, [sys.executable, "-c", script, "--judged", "x"], tmp_path, given={"--judged": b"{}"})
    assert code == 6


def test_an_unnamed_backfill_s_claims_are_forgotten_too(client, tmp_path):
    """Claims of a backfill without an ID (an older executor's) are kept and dropped like any other's."""
    args = (["true"], str(tmp_path), {"PATH": os.environ["PATH"]}, f"unnamed-{uuid.uuid4().hex[:8]}", "t", "b", 2.0,
            60.0, "", 1)  # fmt: skip
    assert client.submit(run_child, *args, pure=False).result(timeout=60) == 0
    assert client.submit(run_child, *args, pure=False).result(timeout=60) == RAN_ALREADY
    dask_task.forget_claims(client, "")
    assert client.submit(run_child, *args, pure=False).result(timeout=60) == 0


def test_a_reaped_child_s_group_is_never_signalled(monkeypatch):
    """The worker signals its child's group only while the child is unreaped: once reaped, its number may be
    another process's."""
    child = psutil.Popen(["true"], start_new_session=True)
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "killpg", lambda group, signum: sent.append((group, signum)))
    dask_task._signal_child(child, signal.SIGCONT)  # unreaped (perhaps a zombie): its group is ours
    child.wait()
    dask_task._signal_child(child, signal.SIGKILL)
    assert sent == [(child.pid, signal.SIGCONT)]


def test_signal_group_reaches_this_workers_child_and_only_a_verified_other_process(client, tmp_path):
    """Through ``client.run``: a group led by a worker's own child is signalled; another process is signalled
    only when its start time matches the one recorded, never on its bare number."""
    stranger = psutil.Popen(["sleep", "30"], start_new_session=True)
    try:
        started, birth = process_identity(stranger.pid)
        assert not dask_task.signal_group(stranger.pid, signal.SIGTERM, started + 5, None)
        assert not dask_task.signal_group(stranger.pid, signal.SIGTERM, started, "another-boot:1")  # born elsewhen
        assert not dask_task.signal_group(stranger.pid, signal.SIGTERM, None, None)
        assert stranger.poll() is None
        # Without a recorded birth, the start time decides.
        assert dask_task.signal_group(stranger.pid, signal.SIGCONT, started, None) is True
        # A recorded birth decides, whatever the wall clock did since the start was recorded: stopped, alive.
        assert dask_task.signal_group(stranger.pid, signal.SIGSTOP, started + 5, birth) is True
        dask_task.signal_group(stranger.pid, signal.SIGKILL, started, birth)
        assert stranger.wait(timeout=30) == -signal.SIGKILL
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            stranger.kill()
            stranger.wait()
    mark = tmp_path / "up"
    argv = ["sh", "-c", f"echo $$ > {mark}; while :; do sleep 0.05; done"]
    future = client.submit(run_child, argv, str(tmp_path), {"PATH": os.environ["PATH"]}, "own-a1", "topic-own",
                           "beat-own", 2.0, 60.0, backfill("own"), 1, pure=False)  # fmt: skip
    deadline = time.monotonic() + 60
    while not mark.exists() or not mark.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    pid = int(mark.read_text())
    client.run(dask_task.signal_group, pid, signal.SIGTERM, None, None)  # the owner's child: its own, unreaped
    assert future.result(timeout=60) == -signal.SIGTERM


def test_a_worker_sees_a_path_only_when_it_exists(tmp_path):
    """The check run on every worker before the first launch."""
    assert dask_task.can_see(str(tmp_path)) and not dask_task.can_see(str(tmp_path / "missing"))


def test_two_tasks_of_one_run_id_claiming_at_once_let_only_one_start_its_child(client):
    """A run ID claimed by two tasks at the same moment (a task recomputed while its first copy still ran on a
    worker taken for lost) is granted to one of them only: a claim read, then written in a second round trip, let
    both through."""
    workers = list(client.scheduler_info()["workers"])[:2]
    claims = backfill("raced")
    both = 0
    for pair in range(40):
        run_id = f"bf-raced-p{pair}-a1"
        futures = [
            client.submit(dask_task._claim, claims, run_id, 1, workers=[worker], pure=False, allow_other_workers=False)
            for worker in workers
        ]
        granted = [future.result(timeout=60) for future in futures]
        assert granted.count("claimed") >= 1, granted
        both += granted.count("claimed") == 2
    dask_task.forget_claims(client, claims)
    assert both == 0, f"{both} of 40 run IDs were granted to both tasks"


def test_what_is_sent_to_the_scheduler_runs_where_backfill_cannot_be_imported(client, tmp_path):
    """The functions a task, a takeover and a launcher's start send the scheduler travel by value: a scheduler's
    machine without our package (a cluster's image built with Dask alone) still takes claims and fences and says
    its allowed-failures. Checked by unpickling them where importing engine fails."""
    import subprocess

    from distributed.protocol.pickle import dumps

    sent: list[bytes] = []

    class Recorder:  # the client a task would use (looked up in distributed as the claim runs): what it sends
        def run_on_scheduler(self, function, *args):
            sent.append(dumps(function))
            return 0 if function.__name__ == "read" else "claimed"

    import distributed

    original = distributed.get_client
    distributed.get_client = lambda: Recorder()
    try:
        assert dask_task._claim(backfill("by-value"), "bf-by-value-a1", 2) == "claimed"
        dask_task.raise_fence(Recorder(), backfill("by-value"), 3)
        assert allowed_failures(Recorder()) == 0
    finally:
        distributed.get_client = original
    script = (
        "import sys\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'engine' or name.startswith('engine.'): raise ImportError('no ' + name)\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "from distributed.protocol.pickle import loads\n"
        "claim = loads(open(sys.argv[1], 'rb').read())\n"
        "class Scheduler:\n"
        "    metadata = {}\n"
        "    def get_metadata(self, key, default=None): return self.metadata.get(tuple(key), default)\n"
        "    def set_metadata(self, key, value): self.metadata[tuple(key)] = value\n"
        "scheduler = Scheduler()\n"
        "fence = loads(open(sys.argv[2], 'rb').read())\n"
        "print(claim('b', 'r', 2, dask_scheduler=scheduler), claim('b', 'r', 2, dask_scheduler=scheduler))\n"
        "fence('b', 3, dask_scheduler=scheduler)\n"
        "print(claim('b', 'r2', 2, dask_scheduler=scheduler), claim('b', 'r3', 3, dask_scheduler=scheduler))\n"
        "read = loads(open(sys.argv[3], 'rb').read())\n"
        "print(read(dask_scheduler=scheduler))\n"
        "print('engine' in sys.modules)\n"
    )
    files = [tmp_path / name for name in ("claim.pickle", "fence.pickle", "read.pickle")]
    for file, pickled in zip(files, sent, strict=True):
        file.write_bytes(pickled)
    argv = [sys.executable, "-c", script, *map(str, files)]
    env = {**os.environ, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
    result = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["claimed", "ran", "fenced", "claimed", "0", "False"]
