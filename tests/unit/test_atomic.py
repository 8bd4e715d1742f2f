"""The atomic write protocol itself: temp file, fsync, rename, directory fsync — in that order — and what a
crash or a full disk leaves behind between the steps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.base import atomic
from engine.base.atomic import write_atomic


def test_the_protocol_is_temp_fsync_rename_then_directory_fsync(tmp_path, monkeypatch):
    """Observed calls, in order: the data goes to a temporary file in the same directory, the file is fsynced,
    renamed over the target, and the directory is fsynced after the rename."""
    calls: list[tuple[str, str]] = []
    real_open, real_fsync, real_replace = os.open, os.fsync, os.replace
    names: dict[int, str] = {}

    def spy_open(path, flags, mode=0o777):
        fd = real_open(path, flags, mode)
        names[fd] = str(path)
        calls.append(("open", Path(path).name))
        return fd

    def spy_fsync(fd):
        calls.append(("fsync", Path(names.get(fd, "?")).name))
        return real_fsync(fd)

    def spy_replace(source, target):
        calls.append(("rename", f"{Path(source).name}->{Path(target).name}"))
        return real_replace(source, target)

    monkeypatch.setattr(atomic.os, "open", spy_open)
    monkeypatch.setattr(atomic.os, "fsync", spy_fsync)
    monkeypatch.setattr(atomic.os, "replace", spy_replace)
    target = tmp_path / "record.json"
    write_atomic(target, b"new")
    temporary = calls[0][1]
    assert temporary.startswith(".record.json.") and temporary.endswith(".tmp")
    assert calls == [
        ("open", temporary),
        ("fsync", temporary),
        ("rename", f"{temporary}->record.json"),
        ("open", tmp_path.name),
        ("fsync", tmp_path.name),
    ]
    assert target.read_bytes() == b"new"


WRITER = """
import os, signal, sys
from pathlib import Path
from engine.base import atomic
step = sys.argv[2]
real = {"fsync": os.fsync, "replace": os.replace}
def stop_before(name):
    def wrapper(*args):
        if name == step:
            os.kill(os.getpid(), signal.SIGSTOP)  # the test SIGKILLs us here, between two steps
        return real[name](*args)
    return wrapper
atomic.os.fsync = stop_before("fsync")
atomic.os.replace = stop_before("replace")
atomic.write_atomic(Path(sys.argv[1]), b"new" * 1000)
"""


@pytest.mark.parametrize("step", ["fsync", "replace"])
def test_a_writer_killed_between_steps_leaves_the_old_file_whole(tmp_path, step):
    """SIGKILL before the fsync or before the rename: the target still holds exactly the old bytes."""
    target = tmp_path / "record.json"
    target.write_bytes(b"old")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(target), step])
    deadline_status = None
    for _ in range(200):
        with open(f"/proc/{writer.pid}/stat") as stat:
            deadline_status = stat.read().split()[2]
        if deadline_status == "T":
            break
        subprocess.run(["sleep", "0.05"])
    assert deadline_status == "T", "the writer never reached the step"
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    assert target.read_bytes() == b"old"


def test_a_full_disk_leaves_no_temporary_file_and_the_old_file_whole(tiny_disk):
    """ENOSPC while writing: the error reaches the caller, the old file is intact, no .tmp litter remains."""
    target = tiny_disk / "record.json"
    target.write_bytes(b"old")
    with pytest.raises(OSError) as error:
        write_atomic(target, b"x" * (1 << 20))
    assert error.value.errno == 28  # ENOSPC
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["record.json"]


def test_stale_temporaries_of_dead_writers_are_removed_and_live_ones_kept(tmp_path):
    """A writer killed before its rename leaves `.name.PID.TID.tmp`: every such file whose PID is gone is removed
    (names with more dots, or a one-word name, included), whatever order the directory lists them in; files of
    live writers (this process) and every other file stay."""
    import subprocess
    import sys

    from engine.base.atomic import remove_stale_temporaries, temporary_name

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    stale = [tmp_path / f".{name}.{dead_pid}.140000.tmp" for name in ("a.json", "b", "summary.cache.json", "c.json")]
    live = [temporary_name(tmp_path / name) for name in ("d.json", "e", "f.cache.json")]
    others = [tmp_path / name for name in ("g.json", "notes.tmp", ".h.json.x.1.tmp", f".{dead_pid}.1.tmp")]
    for index, path in enumerate([*live[:1], *stale[:2], *live[1:], *stale[2:], *others]):
        path.write_text("{}")
        os.utime(path, (index, index))
    assert sorted(remove_stale_temporaries(tmp_path)) == sorted(stale)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in [*live, *others])


def test_directories_made_on_the_way_get_the_mode_asked_for(tmp_path):
    """ensure_directory(path, mode) gives every directory it creates that mode, parents included."""
    from engine.base.atomic import ensure_directory

    ensure_directory(tmp_path / "a" / "b" / "c", 0o750)
    modes = [(tmp_path / p).stat().st_mode & 0o777 for p in ("a", "a/b", "a/b/c")]
    assert modes == [0o750, 0o750, 0o750]


def test_files_and_directories_are_private_whatever_the_umask(tmp_path):
    """Records may name commands and hosts: files are 0600 and every directory created on the way is 0700, even
    under a permissive umask; a directory that already existed keeps its mode."""
    from engine.base.atomic import ensure_directory

    existing = tmp_path / "existing"
    existing.mkdir(mode=0o755)
    os.chmod(existing, 0o755)
    previous = os.umask(0o022)
    try:
        write_atomic(existing / "a" / "b" / "record.json", b"{}")
        ensure_directory(tmp_path / "c" / "d")
        ensure_directory(tmp_path / "c" / "d")  # twice: nothing to do, no error
    finally:
        os.umask(previous)
    mode = lambda path: path.stat().st_mode & 0o777  # noqa: E731
    assert mode(existing / "a" / "b" / "record.json") == 0o600
    assert [mode(existing / "a"), mode(existing / "a" / "b")] == [0o700, 0o700]
    assert [mode(tmp_path / "c"), mode(tmp_path / "c" / "d")] == [0o700, 0o700]
    assert mode(existing) == 0o755


def test_a_write_that_is_not_durable_never_fsyncs(tmp_path, monkeypatch):
    """durable=False (the counts cache): no fsync of the file nor of the directory; sync_parent=False: the file
    only (the caller syncs the directory once for a batch)."""
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    write_atomic(tmp_path / "cache.json", b"{}", durable=False)
    assert synced == []
    write_atomic(tmp_path / "record.json", b"{}", sync_parent=False)
    assert len(synced) == 1
    assert (tmp_path / "cache.json").read_bytes() == (tmp_path / "record.json").read_bytes() == b"{}"


def test_the_original_error_survives_a_failed_cleanup(tmp_path, monkeypatch):
    """The rename fails and the temporary file is already gone: the caller sees the rename's error (a full
    disk, say), not a FileNotFoundError from the cleanup."""
    import errno

    def failing_replace(source, _target):
        os.unlink(source)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", failing_replace)
    with pytest.raises(OSError) as raised:
        write_atomic(tmp_path / "record.json", b"{}")
    assert raised.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_a_temporary_whose_pid_is_written_in_other_digits_is_kept(tmp_path):
    """A PID field in Arabic-Indic digits is not a PID we wrote: such a file is kept even when int() of it names
    a dead process (only ASCII PIDs of dead writers are removed)."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    arabic = "".join(chr(0x0660 + int(d)) for d in str(dead.pid))
    odd = tmp_path / f".x.json.{arabic}.1.tmp"
    plain = tmp_path / f".y.json.{dead.pid}.1.tmp"
    odd.write_text("")
    plain.write_text("")
    assert atomic.remove_stale_temporaries(tmp_path) == [plain]
    assert odd.exists() and not plain.exists()


def test_a_batch_is_written_and_synced_whole_before_any_rename_then_one_directory_sync(tmp_path, monkeypatch):
    """write_atomic_many of three records: each temporary file written and fsynced, then the three renames, then
    one fsync of their directory (not one per file): the group commit of a batch of launches."""
    calls: list[tuple[str, str]] = []
    real_open, real_fsync, real_replace = os.open, os.fsync, os.replace
    names: dict[int, str] = {}

    def spy_open(path, flags, mode=0o777):
        fd = real_open(path, flags, mode)
        names[fd] = Path(path).name
        return fd

    monkeypatch.setattr(atomic.os, "open", spy_open)
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: (calls.append(("fsync", names[fd])), real_fsync(fd))[1])
    monkeypatch.setattr(
        atomic.os, "replace", lambda a, b: (calls.append(("rename", Path(b).name)), real_replace(a, b))[1]
    )
    files = [(tmp_path / f"{name}.json", name.encode()) for name in ("a", "b", "c")]
    atomic.write_atomic_many(files)
    assert [kind for kind, _ in calls] == ["fsync"] * 3 + ["rename"] * 3 + ["fsync"]
    assert [name for kind, name in calls if kind == "rename"] == ["a.json", "b.json", "c.json"]
    assert calls[-1] == ("fsync", tmp_path.name)
    assert all(name.startswith(".") and name.endswith(".tmp") for _, name in calls[:3])
    assert [path.read_bytes() for path, _ in files] == [b"a", b"b", b"c"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json", "c.json"]


def test_a_batch_that_fails_midway_leaves_later_files_whole_and_no_temporary(tmp_path):
    """The third of four targets is a directory (its rename fails): the first two are replaced, the third and
    fourth keep their old state, the error reaches the caller, and no temporary file is left in the directory. A
    target whose directory does not exist yet gets it made."""
    first, second, third, fourth = (tmp_path / f"{name}.json" for name in "abcd")
    first.write_bytes(b"old a")
    third.mkdir()
    fourth.write_bytes(b"old d")
    with pytest.raises(IsADirectoryError):
        atomic.write_atomic_many([(first, b"new a"), (second, b"new b"), (third, b"new c"), (fourth, b"new d")])
    assert (first.read_bytes(), second.read_bytes(), fourth.read_bytes()) == (b"new a", b"new b", b"old d")
    assert third.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json", "c.json", "d.json"]
    deeper = tmp_path / "made" / "d.json"
    atomic.write_atomic_many([(deeper, b"d")])
    assert deeper.read_bytes() == b"d"


def test_a_full_disk_in_a_batch_renames_nothing_and_leaves_no_temporary(tiny_disk):
    """ENOSPC while staging the second file of a batch: no file is replaced (renames come after every file is
    staged), the first file's temporary is removed, and the error reaches the caller."""
    first, second = tiny_disk / "a.json", tiny_disk / "b.json"
    first.write_bytes(b"old a")
    with pytest.raises(OSError) as error:
        atomic.write_atomic_many([(first, b"new a"), (second, b"x" * (1 << 20))])
    assert error.value.errno == 28
    assert first.read_bytes() == b"old a"
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["a.json"]


def test_the_original_error_survives_a_failed_cleanup_of_a_write(tmp_path, monkeypatch):
    """Writing the temporary file fails and it is already gone: the caller sees the write's error (a full disk),
    not a FileNotFoundError from the cleanup; nothing is left behind."""
    import errno

    def failing_write(descriptor, _data):
        for name in os.listdir(tmp_path):
            os.unlink(tmp_path / name)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "write", failing_write)
    with pytest.raises(OSError) as raised:
        write_atomic(tmp_path / "record.json", b"{}")
    assert raised.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_a_new_file_never_replaces_one_of_the_same_name(tmp_path, monkeypatch):
    """write_new of a name that is taken writes ``-2``, then ``-3`` beside it; each file whole, the first untouched,
    the directory synced after each, no temporary left."""
    synced: list[Path] = []
    real_sync = atomic.sync_directory
    monkeypatch.setattr(atomic, "sync_directory", lambda path: (synced.append(path), real_sync(path))[1])
    first = tmp_path / "record-20240101T000000Z.yml"
    assert atomic.write_new(first, b"one") == first
    assert atomic.write_new(first, b"two") == tmp_path / "record-20240101T000000Z-2.yml"
    assert atomic.write_new(first, b"three") == tmp_path / "record-20240101T000000Z-3.yml"
    assert sorted((p.name, p.read_bytes()) for p in tmp_path.iterdir()) == [
        ("record-20240101T000000Z-2.yml", b"two"),
        ("record-20240101T000000Z-3.yml", b"three"),
        ("record-20240101T000000Z.yml", b"one"),
    ]
    assert synced == [tmp_path] * 3


def test_a_new_file_is_synced_before_it_takes_its_name(tmp_path, monkeypatch):
    """write_new: the file's data is fsynced before the link that gives it its name, then the directory: a crash
    never leaves a named record with bytes the disk does not hold."""
    calls: list[str] = []
    real_fsync, real_link = os.fsync, os.link
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(atomic.os, "link", lambda source, target: (calls.append("link"), real_link(source, target))[1])
    atomic.write_new(tmp_path / "r.yml", b"x")
    assert calls == ["fsync", "link", "fsync"]  # the file, its name, the directory


def test_a_new_file_gives_up_once_9_998_numbered_names_are_taken(tmp_path):
    """``r.yml`` and ``r-2.yml`` … ``r-9999.yml`` all taken: one clear error naming the path, no ``r-10000.yml``
    written, no temporary left."""
    path = tmp_path / "r.yml"
    for name in ["r.yml", *(f"r-{number}.yml" for number in range(2, 10_000))]:
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(FileExistsError, match=r"r\.yml and 9,998 numbered names beside it are taken"):
        atomic.write_new(path, b"x")
    assert len(list(tmp_path.iterdir())) == 9_999 and not (tmp_path / "r-10000.yml").exists()


def test_a_new_file_on_a_file_system_without_hard_links_takes_its_name_by_an_exclusive_create(tmp_path, monkeypatch):
    """Where ``link`` is refused (EPERM, as on some FUSE or FAT mounts) the name is reserved by an exclusive create
    and the synced file renamed over it: the same numbering, each file whole, no temporary left."""

    def no_links(source, target):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(atomic.os, "link", no_links)
    path = tmp_path / "r.yml"
    path.write_bytes(b"kept")
    assert atomic.write_new(path, b"new") == tmp_path / "r-2.yml"
    assert sorted((p.name, p.read_bytes()) for p in tmp_path.iterdir()) == [("r-2.yml", b"new"), ("r.yml", b"kept")]


def test_a_new_file_that_fails_to_write_leaves_nothing(tiny_disk):
    """ENOSPC while writing: the error reaches the caller, no name is taken and no temporary is left."""
    with pytest.raises(OSError) as error:
        atomic.write_new(tiny_disk / "r.yml", b"x" * (1 << 20))
    assert error.value.errno == 28
    assert list(tiny_disk.iterdir()) == []


def test_the_latest_record_is_the_last_written_not_the_last_by_name(tmp_path):
    """The second record of a second (``…Z-2.yml``) sorts before the first (``…Z.yml``) by name: the latest is the
    one written last; none in an empty directory."""
    from tui.cli.browse_command import latest_record

    assert latest_record(tmp_path) is None
    first = tmp_path / "backfill-p-20240101T000000Z.yml"
    second = tmp_path / "backfill-p-20240101T000000Z-2.yml"
    first.write_text("first")
    second.write_text("second")
    os.utime(first, ns=(1_000_000_000, 1_000_000_000))
    os.utime(second, ns=(2_000_000_000, 2_000_000_000))
    assert latest_record(tmp_path) == second
