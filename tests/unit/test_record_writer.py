"""The record writer's write-ahead and full-disk paths in-process: a write-ahead is never overtaken by an older
queued version of its file and never waits on other files; a full disk defers the latest version of each record
and writes them once the reserve is given back; a write-ahead on a full disk is refused, never deferred; a
fenced owner writes nothing."""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest

from engine.store import record_writer as writer_module
from engine.store.record_writer import RecordWriter
from tests.hang_guard import finishes

REAL_WRITE, REAL_WRITE_MANY = writer_module.write_atomic, writer_module.write_atomic_many


class Disk:
    """write_atomic as the writer sees it: a file can be held (its write waits for a release) and the disk can
    be full (ENOSPC) or failing (EIO)."""

    def __init__(self) -> None:
        self.held: dict[str, threading.Event] = {}
        self.started: dict[str, threading.Event] = {}
        self.failure: int | None = None
        self.writes: list[tuple[str, bytes, bool]] = []

    def hold(self, name: str) -> threading.Event:
        self.held[name], self.started[name] = threading.Event(), threading.Event()
        return self.held[name]

    def write(self, path: Path, data: bytes, *, durable: bool = True, sync_parent: bool = True) -> None:
        self._check(path, data, durable)
        REAL_WRITE(path, data, durable=durable, sync_parent=sync_parent)

    def write_many(self, files: list[tuple[Path, bytes]]) -> None:
        """A batch of write-aheads (always durable), each file held or failing as a single write would be."""
        for path, data in files:
            self._check(path, data, True)
        REAL_WRITE_MANY(files)

    def _check(self, path: Path, data: bytes, durable: bool) -> None:
        if path.name in self.held:  # the first write of the file only
            held = self.held.pop(path.name)
            self.started[path.name].set()
            assert held.wait(30), "the test never released the file"
        if self.failure is not None:
            raise OSError(self.failure, "simulated")
        self.writes.append((path.name, data, durable))


@pytest.fixture
def disk(monkeypatch) -> Disk:
    simulated = Disk()
    monkeypatch.setattr(writer_module, "write_atomic", simulated.write)
    monkeypatch.setattr(writer_module, "write_atomic_many", simulated.write_many)
    return simulated


def test_a_write_ahead_goes_behind_a_queued_version_of_its_file(tmp_path, disk):
    """A record still queued for the same file is written first, then the write-ahead: the file ends with the
    write-ahead's bytes, durably, never overtaken by the older version."""
    writer = RecordWriter(tmp_path)
    release = disk.hold("a.json")
    writer.put(tmp_path / "a.json", b"queued", durable=False)
    assert disk.started["a.json"].wait(10)
    ahead = threading.Thread(target=writer.write_ahead, args=(tmp_path / "a.json", b"ahead"))
    ahead.start()
    release.set()
    finishes(ahead.join)
    finishes(writer.close)
    assert (tmp_path / "a.json").read_bytes() == b"ahead"
    assert [w for w in disk.writes if w[0] == "a.json"] == [("a.json", b"queued", False), ("a.json", b"ahead", True)]


def test_a_write_ahead_never_waits_for_other_files(tmp_path, disk):
    """With the writer's thread stuck on another file, and after earlier writes of this file were drained, a
    write-ahead is written on the caller's thread at once (the queue's count of it went back to zero)."""
    writer = RecordWriter(tmp_path)
    writer.put(tmp_path / "a.json", b"one", durable=False)
    finishes(lambda: writer.put_and_wait(tmp_path / "a.json", b"two"))
    writer.put(tmp_path / "a.json", b"two again", durable=True)
    finishes(writer.drain)
    release = disk.hold("other.json")
    writer.put(tmp_path / "other.json", b"slow", durable=False)
    assert disk.started["other.json"].wait(10)
    finishes(lambda: writer.write_ahead(tmp_path / "a.json", b"three"), seconds=10)
    assert (tmp_path / "a.json").read_bytes() == b"three" and disk.writes[-1] == ("a.json", b"three", True)
    release.set()
    finishes(writer.close)


def test_a_fenced_owner_writes_nothing_ahead(tmp_path, disk):
    """A write-ahead asked for by an owner that lost its lease writes nothing."""
    writer = RecordWriter(tmp_path, may_write=lambda: False)
    writer.write_ahead(tmp_path / "a.json", b"late")
    finishes(writer.close)
    assert not (tmp_path / "a.json").exists() and disk.writes == []


@pytest.mark.parametrize("code, full", [(errno.ENOSPC, True), (errno.EIO, False)])
def test_a_write_ahead_that_cannot_be_written_is_refused(tmp_path, disk, code, full):
    """On a full disk the write-ahead raises and the writer says the disk is full (its child must not start);
    any other error raises without calling the disk full."""
    writer = RecordWriter(tmp_path)
    disk.failure = code
    with pytest.raises(OSError) as raised:
        writer.write_ahead(tmp_path / "a.json", b"ahead")
    assert raised.value.errno == code
    assert (writer.full is not None) is full
    disk.failure = None
    finishes(writer.close)


def test_a_full_disk_defers_the_latest_version_of_each_record_until_the_reserve_is_given_back(tmp_path, disk):
    """Records queued on a full disk are kept, the latest version of each; drain says the disk is full; once the
    reserve is released they are written, durably, and counted; a write-ahead queued meanwhile is refused and
    never deferred."""
    writer = RecordWriter(tmp_path)
    disk.failure = errno.ENOSPC
    writer.put(tmp_path / "a.json", b"a1", durable=False)
    writer.put(tmp_path / "a.json", b"a2", durable=False)
    writer.put(tmp_path / "b.json", b"b1", durable=True)
    with pytest.raises(OSError) as full:
        finishes(writer.drain)
    assert full.value.errno == errno.ENOSPC and writer.full is full.value
    with pytest.raises(OSError):
        writer.put_and_wait(tmp_path / "c.json", b"ahead")
    released: list[bool] = []
    disk.failure = None
    written = writer.write_deferred(lambda: released.append(True) or True)
    assert written == 2 and released == [True]
    assert (tmp_path / "a.json").read_bytes() == b"a2" and (tmp_path / "b.json").read_bytes() == b"b1"
    assert not (tmp_path / "c.json").exists()
    assert {(name, durable) for name, _, durable in disk.writes} == {("a.json", True), ("b.json", True)}
    assert writer.write_deferred(lambda: released.append(True) or True) == 0 and released == [True]
    finishes(writer.close)


def test_nothing_deferred_gives_nothing_back(tmp_path, disk):
    """Without a full disk there is nothing to write afterwards, and the reserve is not released."""
    writer = RecordWriter(tmp_path)
    writer.put(tmp_path / "a.json", b"a", durable=True)
    released: list[bool] = []
    assert writer.write_deferred(lambda: released.append(True) or True) == 0 and released == []
    finishes(writer.close)


def test_deferred_records_of_a_fenced_owner_are_not_written(tmp_path, disk):
    """An owner fenced while its records waited for room writes none of them when the room comes."""
    owner = {"owns": True}
    writer = RecordWriter(tmp_path, may_write=lambda: owner["owns"])
    disk.failure = errno.ENOSPC
    writer.put(tmp_path / "a.json", b"a", durable=True)
    with pytest.raises(OSError):
        finishes(writer.drain)
    disk.failure, owner["owns"] = None, False
    writer.write_deferred(lambda: True)
    assert not (tmp_path / "a.json").exists()
    finishes(writer.close)


def test_after_the_writer_failed_nothing_deferred_is_written(tmp_path, disk):
    """A writer that failed (an error other than a full disk) writes nothing later, deferred or not."""
    writer = RecordWriter(tmp_path)
    disk.failure = errno.ENOSPC
    writer.put(tmp_path / "a.json", b"a", durable=True)
    with pytest.raises(OSError):
        finishes(writer.drain)
    disk.failure = errno.EIO
    writer.full = None
    writer.put(tmp_path / "b.json", b"b", durable=True)
    with pytest.raises(OSError):
        finishes(writer.drain)
    disk.failure = None
    assert writer.write_deferred(lambda: True) == 0
    assert not (tmp_path / "a.json").exists()
    with pytest.raises(OSError):
        writer.put(tmp_path / "c.json", b"c", durable=True)
    with pytest.raises(OSError):
        writer.put_and_wait(tmp_path / "c.json", b"c")
    with pytest.raises(OSError):
        writer.write_ahead(tmp_path / "c.json", b"c")


def test_every_record_of_a_batch_is_written(tmp_path, disk):
    """Records queued while the writer was busy are written as one batch, every one of them."""
    writer = RecordWriter(tmp_path)
    release = disk.hold("x.json")
    writer.put(tmp_path / "x.json", b"x", durable=False)
    assert disk.started["x.json"].wait(10)
    for name in ("a.json", "b.json", "c.json"):
        writer.put(tmp_path / name, name.encode(), durable=True)
    release.set()
    finishes(writer.drain)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json", "c.json", "x.json"]
    finishes(writer.close)


def test_a_batch_written_ahead_goes_behind_a_queued_version_of_any_of_its_files(tmp_path, disk):
    """A batch of three write-aheads whose second file still has a queued write: the whole batch goes behind it,
    in order, each durably, and the call returns only once the last is written; files end with the batch's
    bytes. With nothing queued the batch is written at once on the caller's thread, with its index rows."""
    writer = RecordWriter(tmp_path)
    release = disk.hold("b.json")
    writer.put(tmp_path / "b.json", b"queued", durable=False)
    assert disk.started["b.json"].wait(10)
    batch = [(tmp_path / f"{name}.json", f"ahead {name}".encode(), None) for name in ("a", "b", "c")]
    done = threading.Event()
    ahead = threading.Thread(target=lambda: (writer.write_ahead_many(batch), done.set()))
    ahead.start()
    assert not done.wait(0.2), "the batch overtook the queued write"
    release.set()
    finishes(ahead.join)
    assert [(name, data) for name, data, _ in disk.writes] == [
        ("b.json", b"queued"), ("a.json", b"ahead a"), ("b.json", b"ahead b"), ("c.json", b"ahead c")
    ]  # fmt: skip
    assert all(durable for _, _, durable in disk.writes[1:])
    assert [(tmp_path / f"{n}.json").read_bytes() for n in "abc"] == [b"ahead a", b"ahead b", b"ahead c"]
    finishes(writer.close)


def test_only_the_newest_version_of_a_file_in_a_batch_is_written_and_as_durably_as_any(tmp_path, disk):
    """A running record (not durable) and a final one (durable) of one file queued while the writer was busy are
    one write, the final, durable; then a durable version followed in its batch by a non-durable one is written
    once, with the newer bytes, durably; another file of the batch is written as queued."""
    writer = RecordWriter(tmp_path)
    for versions in ([(b"running", False), (b"final", True)], [(b"final 2", True), (b"running 3", False)]):
        release = disk.hold("x.json")
        writer.put(tmp_path / "x.json", b"first", durable=False)
        assert disk.started["x.json"].wait(10)
        disk.writes.clear()
        for data, durable in versions:
            writer.put(tmp_path / "p.json", data, durable=durable)
        writer.put(tmp_path / "q.json", b"other", durable=False)
        release.set()
        finishes(writer.drain)
        newest = versions[-1][0]
        assert disk.writes == [("x.json", b"first", False), ("p.json", newest, True), ("q.json", b"other", False)]
        assert (tmp_path / "p.json").read_bytes() == newest
    finishes(writer.close)
