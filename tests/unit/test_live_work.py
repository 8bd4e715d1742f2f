"""The live-work registry: which running work a new invocation must wait for, and entries that live exactly as
long as the processes holding them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from engine.base.errors import Refused
from engine.store.live_work import LiveWork, WorkKind, check_no_copy_running, conflicts, join, read_live

DAY = 86_400_000_000
DB = "/data/warehouse.duckdb"


def work(**fields) -> LiveWork:
    """A backfill of pipeline ``p`` running mid.daily over the first day, on ``DB``."""
    base = {
        "kind": WorkKind.BACKFILL,
        "target": "pipeline:/repo/p",
        "shown": "p",
        "backfill_id": "b1",
        "assets": ("mid.daily",),
        "downstream": ("mart.report",),
        "files": (DB,),
        "windows": ((0, DAY),),
        "pid": 4242,
        "host": "h1",
    }
    return LiveWork(**{**base, **fields})


def test_an_asset_both_run_on_one_file_waits_naming_who_and_what():
    """The sentence names the backfill, its PID and host, the asset and its window."""
    theirs = work()
    assert conflicts(work(backfill_id="b2", windows=((5 * DAY, 6 * DAY),)), [theirs]) == [
        "wait for backfill b1, PID 4242 on h1: it runs mid.daily over 1970-01-01T00:00:00Z → 1970-01-02T00:00:00Z"
    ]


def test_work_of_our_own_backfill_is_never_in_our_way():
    """A crashed executor's entry of the same backfill is ours (its takeover settles it)."""
    assert conflicts(work(), [work(pid=1)]) == []


def test_our_backfill_run_from_another_state_root_is_a_copy_in_our_way():
    """A repository copied with its logs/: the same backfill ID from another store is running work, not ours."""
    ours = work(state_dir="/copy/logs/backfills")
    theirs = work(pid=77, state_dir="/repo/logs/backfills")
    assert conflicts(ours, [theirs]) == [
        "backfill b1 is running from another copy of its state, /repo/logs/backfills/b1 (executor PID 77 on h1): "
        "this copy would run its partitions again beside it; wait for it to end, or stop it there"
    ]


def test_our_backfill_from_the_same_store_however_spelt_is_ours(tmp_path):
    """A symlink to the store is the same store (a crashed executor's entry, settled by the takeover), and an
    entry written without its store names no copy."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "logs")
    ours = work(state_dir=str(tmp_path / "link"))
    assert conflicts(ours, [work(pid=1, state_dir=str(tmp_path / "logs"))]) == []
    assert conflicts(ours, [work(pid=1, state_dir=None)]) == []
    assert conflicts(work(state_dir=None), [work(pid=1, state_dir="/elsewhere")]) == []


def test_a_new_backfill_has_no_id_yet_and_still_waits():
    """No ID on our side must not make every entry without one look like ours."""
    theirs = work(kind=WorkKind.RUN, backfill_id=None)
    assert len(conflicts(work(backfill_id=None), [theirs])) == 1
    assert conflicts(work(backfill_id=None), [theirs])[0].startswith("wait for a `backfill run`, PID 4242 on h1")


def test_another_pipeline_on_another_file_is_not_in_the_way():
    """Same asset name, different target, different file: another table."""
    assert conflicts(work(backfill_id="b2", target="pipeline:/other", files=("/other.duckdb",)), [work()]) == []


def test_disjoint_assets_on_one_file_wait_for_duckdbs_single_writer():
    """DuckDB allows one writer process per file: different assets on the same file still wait."""
    ours = work(backfill_id="b2", target="pipeline:/q", assets=("q.other",), downstream=())
    assert conflicts(ours, [work()]) == [
        f"wait for backfill b1, PID 4242 on h1: it writes {DB}, and DuckDB allows one writer process per file"
    ]


@pytest.mark.parametrize(
    ("ours", "clash"),
    [
        ({"assets": ("mart.report",), "downstream": ()}, "mart.report"),  # we run what reads theirs
        ({"assets": ("raw.events",), "downstream": ("mid.daily",)}, "mid.daily"),  # they run what reads ours
        ({"assets": ("mid.daily",), "downstream": ()}, "mid.daily"),
    ],
)
def test_assets_clash_up_and_downstream(ours, clash):
    """An asset one side runs that the other runs or reads from is named."""
    found = conflicts(work(backfill_id="b2", windows=((9 * DAY, 10 * DAY),), **ours), [work()])
    assert len(found) == 1 and f"it runs {clash} over" in found[0]


def test_the_same_command_waits_only_over_overlapping_intervals():
    """Without files: the same target over overlapping windows waits; the next day runs beside it; touching ends
    do not overlap (half-open windows)."""
    theirs = work(target="command:abc", shown="etl", assets=(), downstream=(), files=())
    overlapping = work(backfill_id="b2", target="command:abc", assets=(), downstream=(), files=(),
                       windows=((DAY // 2, 2 * DAY),))  # fmt: skip
    assert conflicts(overlapping, [theirs]) == [
        "wait for backfill b1, PID 4242 on h1: it runs etl (the same target) over "
        "1970-01-01T00:00:00Z → 1970-01-02T00:00:00Z"
    ]
    touching = work(backfill_id="b2", target="command:abc", assets=(), downstream=(), files=(),
                    windows=((DAY, 2 * DAY),))  # fmt: skip
    assert conflicts(touching, [theirs]) == []
    other = work(backfill_id="b2", target="command:xyz", assets=(), downstream=(), files=())
    assert conflicts(other, [theirs]) == []


def test_the_same_pipeline_on_other_files_waits_only_for_the_same_intervals_or_assets():
    """One pipeline in two environments (two files): other assets over other days run side by side."""
    theirs = work(assets=("a",), downstream=())
    apart = work(backfill_id="b2", files=("/dev.duckdb",), assets=("b",), downstream=(), windows=((DAY, 2 * DAY),))
    assert conflicts(apart, [theirs]) == []
    same_days = work(backfill_id="b2", files=("/dev.duckdb",), assets=("b",), downstream=())
    assert len(conflicts(same_days, [theirs])) == 1


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    return tmp_path / "live"


def test_a_live_copy_of_our_backfill_is_refused_by_name_and_our_own_entry_is_not(registry, tmp_path):
    """check_no_copy_running: an entry of our backfill from another state root refuses (naming it); one from ours
    (a crashed executor's), another backfill's and a released one do not."""
    ours, copy = tmp_path / "repo" / "logs", tmp_path / "copy" / "logs"
    elsewhere = {"files": ("/other.duckdb",), "target": "command:x", "assets": (), "downstream": ()}
    other = join(work(backfill_id="b2", state_dir=str(copy), **elsewhere), registry)
    own = join(work(state_dir=str(ours)), registry)
    check_no_copy_running("b1", ours, registry)
    own.release()
    running = join(work(pid=77, state_dir=str(copy)), registry)
    with pytest.raises(Refused) as refused:
        check_no_copy_running("b1", ours, registry)
    assert str(refused.value).startswith(
        f"backfill b1 is running from another copy of its state, {copy}/b1 (executor PID 77 on h1)"
    )
    running.release()
    check_no_copy_running("b1", ours, registry)
    other.release()


def test_join_refuses_what_conflicts_and_leaves_no_entry(registry):
    """The second of two conflicting joins is Refused (exit 3's error) and writes nothing; the first is read back."""
    first = join(work(), registry)
    with pytest.raises(Refused, match="^never: wait for backfill b1, PID 4242 on h1: it runs mid.daily"):
        join(work(backfill_id="b2"), registry)
    assert read_live(registry) == [work()]
    assert len(list(registry.glob("*.json"))) == 1
    first.release()
    assert read_live(registry) == []
    assert list(registry.glob("*.json")) == []
    join(work(backfill_id="b2"), registry).release()  # nothing in the way any more


def test_an_entry_nobody_holds_is_stale_and_removed(registry):
    """A file whose holder died (nobody holds its lock) names no work: not read, and removed by the next join."""
    registry.mkdir()
    stale = registry / "h1.1.dead.json"
    stale.write_bytes(orjson.dumps(work().to_json()))
    assert read_live(registry) == []
    join(work(backfill_id="b2"), registry).release()
    assert not stale.exists()


def test_a_damaged_live_entry_is_passed_over(registry):
    """A held entry that is not valid JSON names no work to wait for, and breaks nothing."""
    held = join(work(), registry)
    held.path.write_bytes(b"{not json")
    assert read_live(registry) == []
    held.release()


def test_an_entry_lives_while_a_child_holding_it_lives(registry):
    """The registrant dies without leaving (its descriptor closed, the file kept): a child that inherited the
    descriptor keeps the work live; once the child is gone the entry is stale."""
    entry = join(work(), registry)
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, pass_fds=(entry.fd,)
    )
    os.close(entry.fd)  # the registrant's crash: no release, no unlink
    try:
        assert read_live(registry) == [work()]
        with pytest.raises(Refused):
            join(work(backfill_id="b2"), registry)
    finally:
        child.communicate(b"")
    assert read_live(registry) == []
    join(work(backfill_id="b2"), registry).release()


def test_an_invocation_refused_at_start_saves_nothing(tmp_path, monkeypatch):
    """Work that joined after the pre-flight passed: start() is Refused, no backfill is saved, and the invocation
    leaves no entry of its own behind."""
    from engine.base.settings import Settings
    from engine.execute.invocation import judge_new
    from engine.guardrails.request import GuardOptions
    from engine.pipeline.options import RunOptions
    from engine.spec.backfill_spec import ExecutionOptions
    from engine.spec.planning import plan_request

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    planned = plan_request(
        target=None, command="true {start}", name=None, start="2024-01-01", end="2024-01-01", timezone="UTC",
        partition="daily", environment=None, config_file=None, run_options=RunOptions(),
        options=ExecutionOptions(), force=False, cwd=tmp_path,
    )  # fmt: skip
    invocation = judge_new(
        planned, GuardOptions(reversible=True), reason="r", state_dir="states", cwd=tmp_path, settings=Settings(),
        can_ask=False,
    )  # fmt: skip
    ours = invocation.preflight.facts.live_work()
    assert invocation.preflight.facts.live == []
    rival = join(LiveWork(**{**ours.to_json(), "backfill_id": "rival", "pid": 1, "host": "h2"}))
    try:
        with pytest.raises(Refused, match="wait for backfill rival, PID 1 on h2: it runs true"), invocation:
            invocation.start(invocation.approve(approve=None, typed=True))
        assert not (tmp_path / "states").exists() or list((tmp_path / "states").iterdir()) == []
        assert [w.backfill_id for w in read_live()] == ["rival"]
    finally:
        rival.release()


def test_keys_and_files_name_one_target_and_one_file_however_spelt(tmp_path):
    """A command's key is a digest of its identity and directory (pinned: entries of earlier runs must still
    match); a pipeline's is its real directory; files are real paths, once each, sorted."""
    import hashlib

    import orjson

    from engine.store.live_work import command_key, pipeline_key, real_files

    text = orjson.dumps({"cwd": "/w", "identity": {"t": "x"}}, option=orjson.OPT_SORT_KEYS)
    assert command_key({"t": "x"}, "/w") == "command:" + hashlib.sha256(text).hexdigest()[:32]
    assert command_key({"t": "x"}, "/v") != command_key({"t": "x"}, "/w")
    (tmp_path / "p").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "p")
    assert pipeline_key(tmp_path / "link") == "pipeline:" + str((tmp_path / "p").resolve())
    (tmp_path / "b.duckdb").write_text("")
    (tmp_path / "a.duckdb").symlink_to(tmp_path / "b.duckdb")
    files = [tmp_path / "a.duckdb", tmp_path / "b.duckdb", tmp_path / "c.duckdb"]
    assert real_files(files) == (str((tmp_path / "b.duckdb").resolve()), str((tmp_path / "c.duckdb").resolve()))


def test_this_process_and_the_registry_s_place(tmp_path, monkeypatch):
    """Work of this process carries its PID and host; the registry is the user state directory's live/."""
    import os
    import socket

    from engine.store.live_work import registry_dir, this_process

    mine = this_process(kind=WorkKind.RUN, target="t", shown="s")
    assert (mine.pid, mine.host) == (os.getpid(), socket.gethostname())
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert registry_dir() == tmp_path / "backfill" / "live"


def test_an_entry_reads_back_with_defaults_for_what_it_lacks():
    """Every field survives JSON; an entry of an older version without lists or a state directory reads with
    empty ones."""
    full = work(state_dir="/s")
    assert LiveWork.from_json(full.to_json()) == full
    bare = LiveWork.from_json({"kind": "run", "target": "t", "shown": "s", "pid": "7", "host": "h"})
    assert bare == LiveWork(kind=WorkKind.RUN, target="t", shown="s", pid=7, host="h")
    assert bare.state_dir is None and bare.windows == () and bare.files == ()


def test_windows_that_only_touch_do_not_overlap_and_are_named_in_utc():
    """[0, DAY) and [DAY, 2·DAY) share no instant: the same target over them both runs; sentences name windows
    in UTC, several joined by commas, none as 'no interval'."""
    from engine.store.live_work import _windows_text

    assert conflicts(work(backfill_id="b2", files=(), assets=("x",), downstream=(), windows=((DAY, 2 * DAY),)),
                     [work(files=(), assets=("y",), downstream=())]) == []  # fmt: skip
    assert _windows_text(((0, DAY), (DAY, 2 * DAY))) == (
        "1970-01-01T00:00:00Z → 1970-01-02T00:00:00Z, 1970-01-02T00:00:00Z → 1970-01-03T00:00:00Z"
    )
    assert _windows_text(()) == "no interval"


def test_every_running_invocation_in_the_way_is_named_once_each():
    """Work of our own backfill and unrelated work are passed over, not stopping the look at the rest; two
    clashing assets are named together; two blockers make two sentences, and a refused join names both."""
    ours = work(backfill_id="b9", assets=("mid.daily", "mid.other"))
    running = [
        work(backfill_id="b9"),  # our own
        work(backfill_id="x", target="pipeline:/elsewhere", files=("/other.duckdb",)),  # unrelated
        work(backfill_id="b2", assets=("mid.daily", "mid.other"), downstream=()),
        work(backfill_id="b3", target="pipeline:/q", assets=("z",), downstream=()),
    ]
    found = conflicts(ours, running)
    assert len(found) == 2
    assert found[0].startswith("wait for backfill b2, PID 4242 on h1: it runs mid.daily, mid.other over ")
    assert found[1] == (
        f"wait for backfill b3, PID 4242 on h1: it writes {DB}, and DuckDB allows one writer process per file"
    )


def test_a_refusal_names_every_blocker(registry):
    """Two entries in the way: one refusal naming both, joined by '; '."""
    first = join(work(backfill_id="b1"), registry)
    second = join(work(backfill_id="b2", target="pipeline:/q", assets=("z",), downstream=(), files=("/o",)), registry)
    try:
        with pytest.raises(Refused) as refused:
            join(work(backfill_id="b3", files=(DB, "/o"), assets=("mid.daily",)), registry)
        message = str(refused.value)
        assert message.startswith("never: wait for backfill ") and message.count("; wait for backfill ") == 1
        assert "backfill b1, PID" in message and "backfill b2, PID" in message
    finally:
        first.release()
        second.release()


def test_a_damaged_entry_before_a_good_one_does_not_hide_it(registry):
    """The registry is read past an entry it cannot parse."""
    import fcntl
    import os

    held = join(work(), registry)
    bad = registry / "0-bad.json"
    bad.write_text("{")
    fd = os.open(bad, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    try:
        assert read_live(registry) == [work()]
    finally:
        os.close(fd)
        held.release()
