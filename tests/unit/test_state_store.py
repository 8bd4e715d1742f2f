"""The state store in-process: creation all or nothing, strict reads, generations, and the .gitignore entry."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import time

import orjson
import pytest

from engine.base.errors import BadInput, StateUnreadable, StateWriteFailed
from engine.dates.instants import load_zone
from engine.dates.plan import Plan, parse_unit
from engine.store.records import Attempt, PartitionRecord
from engine.store.state_store import StateStore, add_to_gitignore, default_state_root, new_backfill_id
from engine.store.status import Status

DAY = 86_400_000_000
PLAN = Plan(0, 4 * DAY, load_zone("UTC"), parse_unit("daily"))


def id_of(start: int, end: int) -> str:
    return f"{start:016x}{end:016x}"


def record(index: int, status: str, attempts: list[str]) -> PartitionRecord:
    interval = PLAN.interval(index)
    return PartitionRecord(
        id_of(interval.start, interval.end),
        index,
        "",
        "",
        interval.start,
        interval.end,
        status,
        [
            Attempt(run_id=f"run-{index}-{n}", status=a, started_at="2024-01-01T00:00:00Z", duration=1.5 * n)
            for n, a in enumerate(attempts, 1)
        ],
    )


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_store_holds_its_manifest_and_private_directories(tmp_path):
    """create() makes the directory, partitions/ and children/ (0700) and an indented manifest (0600)."""
    store = StateStore(tmp_path / "root" / "20240101-000000-abcdef")
    store.create({"format": 1, "target": "true"})
    assert store.id == "20240101-000000-abcdef"
    assert [mode(p) for p in (store.directory, store.partitions, store.children)] == [0o700] * 3
    manifest = store.directory / "manifest.json"
    assert mode(manifest) == 0o600
    assert manifest.read_bytes() == b'{\n  "format": 1,\n  "target": "true"\n}\n'
    assert store.read_manifest() == {"format": 1, "target": "true"}


def test_a_store_that_cannot_be_completed_leaves_nothing(tmp_path):
    """An existing partitions/ makes creation fail half-way: the directory is removed, nothing was started."""
    store = StateStore(tmp_path / "b1")
    original_mkdir = os.mkdir

    def failing_mkdir(path, mode=0o777):
        if str(path).endswith("children"):
            raise OSError(28, "No space left on device")
        return original_mkdir(path, mode)

    os.mkdir = failing_mkdir
    try:
        with pytest.raises(StateWriteFailed) as raised:
            store.create({"format": 1})
    finally:
        os.mkdir = original_mkdir
    assert (
        str(raised.value) == f"cannot save backfill b1 under {tmp_path} (No space left on device): nothing was started"
    )
    assert not store.directory.exists()


def test_a_stop_while_the_store_is_built_leaves_no_backfill_and_a_killed_build_is_swept(tmp_path):
    """Ctrl+C while the manifest is written leaves no directory at all; a build left by a killed process
    (dead PID) is removed by the next creation, a live one's is kept."""
    root = tmp_path / "root"
    store = StateStore(root / "b1")
    import engine.store.state_store as state_store

    original_write = state_store.write_atomic

    def interrupted_write(*args, **kwargs):
        raise KeyboardInterrupt

    state_store.write_atomic = interrupted_write
    try:
        with pytest.raises(KeyboardInterrupt):
            store.create({"format": 1})
    finally:
        state_store.write_atomic = original_write
    assert os.listdir(root) == []
    dead = subprocess.Popen(["true"])
    dead.wait()
    (root / f".building-{dead.pid}.x").mkdir()
    (root / f".building-{os.getpid()}.y").mkdir()
    StateStore(root / "b2").create({"format": 1})
    assert sorted(os.listdir(root)) == [f".building-{os.getpid()}.y", "b2"]


def test_an_unusable_state_directory_is_bad_input(tmp_path):
    """A file where the state root should be, or a root we cannot write: one line naming it."""
    (tmp_path / "file").write_text("")
    with pytest.raises(BadInput) as raised:
        StateStore(tmp_path / "file" / "b1").create({"format": 1})
    assert str(raised.value) == f"state directory '{tmp_path}/file' is not a writable directory: give one that is"
    with pytest.raises(BadInput) as raised:
        StateStore(tmp_path / "file" / "sub" / "b1").create({"format": 1})
    assert str(raised.value) == (
        f"state directory '{tmp_path}/file/sub' cannot be used (Not a directory): give a writable directory"
    )


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "is missing: {dir} is not a backfill"),
        (b"{", "is not valid JSON"),
        (b"[1]", "has an unknown format: it was not written by this backfill"),
        (b'{"format": 2}', "has an unknown format: it was not written by this backfill"),
    ],
)
def test_a_manifest_is_read_strictly(tmp_path, content, problem):
    """Missing, garbled or foreign manifests are errors naming the file, never guessed at."""
    store = StateStore(tmp_path / "b1")
    store.directory.mkdir()
    if content is not None:
        (store.directory / "manifest.json").write_bytes(content)
    with pytest.raises(StateUnreadable) as raised:
        store.read_manifest()
    assert str(store.directory / "manifest.json") in str(raised.value)
    assert problem.format(dir=store.directory) in str(raised.value)


def test_the_board_counts_every_record_and_lists_the_running_ones(tmp_path):
    """Statuses, attempt counts and last durations come from the records; temporary files are ignored."""
    store = StateStore(tmp_path / "b1")
    store.create({"format": 1})
    store.write_record(record(0, "succeeded", ["failed", "succeeded"]), durable=True)
    store.write_record(record(2, "running", ["running"]), durable=False)
    (store.partitions / f".{id_of(0, DAY)}.json.1.2.tmp").write_text("{")
    board, running = store.load_board(PLAN, id_of)
    assert [board.status(i) for i in range(4)] == [Status.SUCCEEDED, Status.QUEUED, Status.RUNNING, Status.QUEUED]
    assert [board.attempts(i) for i in range(4)] == [2, 0, 1, 0]
    assert board.duration(0) == 3.0
    assert [r.index for r in running] == [2]
    assert store.read_record(id_of(DAY, 2 * DAY), PLAN, id_of) is None
    assert store.read_record(id_of(0, DAY), PLAN, id_of).status == "succeeded"
    assert sorted(p.name for p in store.record_files()) == sorted(
        [f"{id_of(0, DAY)}.json", f"{id_of(2 * DAY, 3 * DAY)}.json"]
    )


def test_missing_records_directory_is_an_error_not_a_fresh_start(tmp_path):
    """A deleted partitions/ would rerun everything silently: it is an error naming the directory."""
    store = StateStore(tmp_path / "b1")
    store.create({"format": 1})
    store.partitions.rmdir()
    with pytest.raises(StateUnreadable, match="partitions is missing: the records of backfill b1 are gone"):
        store.load_board(PLAN, id_of)
    assert list(store.record_files()) == []


def test_generations_round_trip_and_garbled_ones_are_errors(tmp_path):
    """The last executor's generation is read back as written; a missing file is None; anything else is an error."""
    store = StateStore(tmp_path / "b1")
    store.create({"format": 1})
    assert store.read_generation() is None
    written = store.write_generation(3, 1234, 1700000000.5, "2024-01-01T00:00:00Z")
    assert store.read_generation() == written
    assert (written.number, written.pid, written.pid_started, written.started_at) == (
        3,
        1234,
        1700000000.5,
        "2024-01-01T00:00:00Z",
    )
    assert orjson.loads(store.generation_path.read_bytes())["host"] == written.host != ""
    for content, problem in [
        (b"{", "cannot be read"),
        (b'{"generation": 1}', "lacks 'pid'"),
        (b'{"generation": true, "pid": 1, "pid_started": 0, "host": "h", "started_at": ""}', "has generation True"),
        (b'{"generation": 0, "pid": 1, "pid_started": 0, "host": "h", "started_at": ""}', "has generation 0"),
        (b'{"generation": "2", "pid": 1, "pid_started": 0, "host": "h", "started_at": ""}', "has generation '2'"),
    ]:
        store.generation_path.write_bytes(content)
        with pytest.raises(StateUnreadable, match=re.escape(problem)):
            store.read_generation()


def test_the_state_root_is_ignored_by_git_once(tmp_path):
    """One entry is added, with a comment, after a last line without newline; a parent already ignored, a second
    call or a root outside the repository add nothing; comments and negations are not taken for entries."""
    repository = tmp_path / "repo"
    repository.mkdir()
    root = default_state_root(repository)
    assert root == repository / "logs" / "backfills"
    (repository / ".gitignore").write_text("# logs/backfills\n!logs/backfills\n*.pyc")
    add_to_gitignore(repository, root)
    add_to_gitignore(repository, root)
    add_to_gitignore(repository, tmp_path / "elsewhere")
    assert (repository / ".gitignore").read_text() == (
        "# logs/backfills\n!logs/backfills\n*.pyc\n"
        "# backfill state (manifests, partition records, child logs)\n/logs/backfills/\n"
    )
    other = tmp_path / "other"
    other.mkdir()
    (other / ".gitignore").write_text("/logs/\n")
    add_to_gitignore(other, default_state_root(other))
    assert (other / ".gitignore").read_text() == "/logs/\n"
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    add_to_gitignore(fresh, default_state_root(fresh))
    assert (fresh / ".gitignore").read_text() == (
        "# backfill state (manifests, partition records, child logs)\n/logs/backfills/\n"
    )


def test_backfill_ids_sort_by_creation_and_do_not_repeat():
    """IDs are UTC time to the second plus 6 hex digits."""
    ids = {new_backfill_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", i) for i in ids)


def test_a_random_suffix_drawn_twice_is_drawn_again(monkeypatch):
    """The 6 random hex digits repeat once in a while (a CI run once drew the same pair among 200 IDs of one
    second): a repeat is drawn again, so one process never makes the same ID twice."""
    from engine.store import state_store

    draws = iter(["abcdef", "abcdef", "abcdef", "123456"])
    monkeypatch.setattr(state_store.secrets, "token_hex", lambda _n: next(draws))
    moment = time.gmtime(1_700_000_000)
    monkeypatch.setattr(state_store.time, "gmtime", lambda *_: moment)
    monkeypatch.setattr(state_store, "_ISSUED", set())
    assert [new_backfill_id(), new_backfill_id()] == ["20231114-221320-abcdef", "20231114-221320-123456"]


def test_outside_a_repository_the_state_lives_in_the_users_state_directory(monkeypatch, tmp_path):
    """No repository: <XDG_STATE_HOME>/backfill/backfills, as platformdirs names it."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert default_state_root(None) == tmp_path / "state" / "backfill" / "backfills"


def test_backfill_ids_use_utc_whatever_the_machines_zone(monkeypatch):
    """A machine in Tokyo names backfills by UTC time, so IDs sort the same everywhere."""
    import time

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        before = time.strftime("%Y%m%d-%H", time.gmtime())
        identifier = new_backfill_id()
        after = time.strftime("%Y%m%d-%H", time.gmtime())
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert identifier[:11] in (before, after)


def test_store_files_have_the_documented_names(tmp_path):
    """The names docs/state.md gives, which other tools and operators rely on."""
    store = StateStore(tmp_path / "b1")
    names = [p.name for p in (store.lock_path, store.children_lock_path, store.generation_path, store.partitions)]
    assert names == [".lock", ".children.lock", ".generation.json", "partitions"]
    assert store.log_path("r1") == tmp_path / "b1" / "children" / "r1.log"


def test_a_long_state_path_is_named_in_120_characters(tmp_path):
    """Messages cut a path to its first 120 characters; a store that cannot be made is named too."""
    deep = tmp_path / ("d" * 100) / ("e" * 100)
    deep.parent.mkdir()
    deep.write_text("")  # a file where the state root should be
    with pytest.raises(BadInput) as raised:
        StateStore(deep / "b1").create({"format": 1})
    assert str(raised.value) == f"state directory {str(deep)[:120]!r} is not a writable directory: give one that is"
    taken = tmp_path / "root"
    (taken / "b1").mkdir(parents=True)  # the backfill's own directory exists already
    with pytest.raises(StateWriteFailed) as raised:
        StateStore(taken / "b1").create({"format": 1})
    assert str(raised.value) == (
        f"cannot save backfill b1 under {taken} (a backfill with this ID exists): nothing was started"
    )
    assert sorted(os.listdir(taken)) == ["b1"]


def test_record_files_are_exactly_the_visible_json_files(tmp_path):
    """Hidden files (temporaries, `.x.json`) and anything not `.json` are not records."""
    store = StateStore(tmp_path / "b1")
    store.create({"format": 1})
    for name in ("a.json", "b.json", ".hidden.json", "README", ".a.json.1.2.tmp", "c.json.bak"):
        (store.partitions / name).write_text("{}")
    assert sorted(p.name for p in store.record_files()) == ["a.json", "b.json"]


def test_an_unreadable_manifest_and_missing_records_get_their_whole_message(tmp_path):
    """A manifest that is a directory cannot be read; a missing partitions/ says what to do."""
    store = StateStore(tmp_path / "b1")
    (store.directory / "manifest.json").mkdir(parents=True)
    with pytest.raises(StateUnreadable) as raised:
        store.read_manifest()
    assert str(raised.value) == f"manifest {store.directory / 'manifest.json'} cannot be read (Is a directory)"
    with pytest.raises(StateUnreadable) as raised:
        store.load_board(PLAN, id_of)
    assert str(raised.value) == (
        f"{store.partitions} is missing: the records of backfill b1 are gone, so which partitions ran is unknown; "
        "restore the directory, or start a new backfill"
    )


def test_a_durable_record_write_is_fsynced_and_a_quick_one_is_not(tmp_path, monkeypatch):
    """write_record(durable=True) fsyncs the file and the directory; durable=False neither."""
    from engine.base import atomic

    store = StateStore(tmp_path / "b1")
    store.create({"format": 1})
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    store.write_record(record(1, "running", ["running"]), durable=False)
    assert synced == []
    store.write_record(record(1, "succeeded", ["succeeded"]), durable=True)
    assert len(synced) == 2


def test_the_gitignore_entry_goes_on_a_line_of_its_own(tmp_path):
    """After a file ending with a newline, no blank line is added; the host in a generation is this machine's."""
    import socket

    repository = tmp_path / "repo"
    repository.mkdir()
    (repository / ".gitignore").write_text("*.pyc\n")
    add_to_gitignore(repository, default_state_root(repository))
    assert (repository / ".gitignore").read_text() == (
        "*.pyc\n# backfill state (manifests, partition records, child logs)\n/logs/backfills/\n"
    )
    store = StateStore(tmp_path / "b1")
    store.create({"format": 1})
    assert store.write_generation(1, 1, 0.0, "").host == socket.gethostname()
    assert store.read_generation().host == socket.gethostname()


def test_a_long_state_directory_is_cut_at_120_characters_in_messages(tmp_path):
    """A path of 300 characters is shown by its first 120, quoted, in every state-directory message."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    long_root = blocker / ("x" * 300)
    with pytest.raises(BadInput) as raised:
        StateStore(long_root / "b1").create({"format": 1})
    assert f"state directory {str(long_root)[:120]!r} cannot be used" in str(raised.value)
    with pytest.raises(BadInput) as raised:
        StateStore(blocker / "b1").create({"format": 1})  # the root is the file itself
    assert str(raised.value).startswith(f"state directory {str(blocker)[:120]!r} is not a writable directory")


def test_a_generation_keeps_its_run_s_selection_and_start_beside_its_cluster(tmp_path):
    """The executor's selection and start are written once it knows them and read back; a cluster recorded
    after them keeps them; a selection or start that is not a count or a time of 0 or more reads as unknown
    (an older executor, or a damaged field), never as an error."""
    store = StateStore(tmp_path / "b1")
    store.create({"format": 1})
    written = store.write_generation(2, 1234, 1.0, "2024-01-01T00:00:00Z")
    assert (written.selected, written.run_started_at) == (None, None)
    assert "selected" not in orjson.loads(store.generation_path.read_bytes())
    selected = store.record_selection(written, 40, 1700000000.25, (8, 1))
    assert store.read_generation() == selected and (selected.selected, selected.run_started_at) == (40, 1700000000.25)
    assert selected.parallel == (8, 1)
    clustered = store.record_cluster(selected, "tcp://h:8786", 5.0)
    assert store.read_generation() == clustered and (clustered.selected, clustered.cluster) == (40, "tcp://h:8786")
    base = orjson.loads(store.generation_path.read_bytes())
    for selected_value, started_value in [(True, 1.0), (-1, 1.0), ("40", 1.0), (40, False), (40, -0.5), (40, "t")]:
        store.generation_path.write_bytes(orjson.dumps({**base, "selected": selected_value,
                                                        "run_started_at": started_value}))  # fmt: skip
        read = store.read_generation()
        assert (read.selected is None) == (selected_value not in (40,))
        assert (read.run_started_at is None) == (started_value not in (1.0,))
    store.generation_path.write_bytes(orjson.dumps({**base, "selected": 0, "run_started_at": 0}))
    assert (store.read_generation().selected, store.read_generation().run_started_at) == (0, 0.0)


def test_a_generation_keeps_the_parallelism_it_runs_and_each_live_change(tmp_path):
    """(asked, at once) written at the start and again after a live change, read back; the selection stays; a
    generation without them, or with either not a count of 1 or more, reads as unknown, never as an error."""
    store = StateStore(tmp_path / "b1")
    store.create({"format": 1})
    written = store.write_generation(1, 1234, 1.0, "2024-01-01T00:00:00Z")
    assert written.parallel is None and "parallel" not in orjson.loads(store.generation_path.read_bytes())
    started = store.record_selection(written, 10, 5.0, (4, 4))
    changed = store.record_parallel(started, (9, 2))
    assert store.read_generation() == changed and changed.parallel == (9, 2) and changed.selected == 10
    raw = orjson.loads(store.generation_path.read_bytes())
    assert (raw["max_parallel"], raw["parallel"]) == (9, 2)
    for asked, running in [(0, 1), (1, 0), (True, 1), ("4", 4), (4, None), (None, 4), (2.0, 2)]:
        store.generation_path.write_bytes(orjson.dumps({**raw, "max_parallel": asked, "parallel": running}))
        assert store.read_generation().parallel is None, (asked, running)
    store.generation_path.write_bytes(orjson.dumps({**raw, "max_parallel": 1, "parallel": 1}))
    assert store.read_generation().parallel == (1, 1)
