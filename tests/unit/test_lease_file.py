"""``lease.json`` as other hosts and later versions read it: every field kept through a write and a read, the
exact keys on disk, and every kind of damage refused with one line naming the file."""

from __future__ import annotations

import time

import orjson
import pytest

from engine.base.errors import StateUnreadable
from engine.store.lease import LEASE, Lease, LeasedAttempt, read_lease, write_lease


def _owned() -> Lease:
    return Lease(
        epoch=7,
        host="worker-3",
        pid=4242,
        pid_started=1_700_000_000.25,
        expires_at=1_700_000_060.5,
        attempts=(LeasedAttempt("run-a", 3, 5151, 1_700_000_001.75, "0f3c:150"), LeasedAttempt("run-b", 9, None, None)),
        note="renewed",
        boot="0f3c",
        expires_boot=1234.5,
        host_grace=30.5,
    )


def test_a_lease_reads_back_as_written(tmp_path):
    """Every field survives a write and a read, the attempts in their order."""
    write_lease(tmp_path, _owned())
    assert read_lease(tmp_path) == _owned()


def test_the_file_holds_the_documented_keys(tmp_path):
    """The keys on disk are the ones another host's backfill reads, with format 1."""
    write_lease(tmp_path, _owned())
    assert orjson.loads((tmp_path / LEASE).read_bytes()) == {
        "format": 1,
        "epoch": 7,
        "host": "worker-3",
        "pid": 4242,
        "pid_started": 1_700_000_000.25,
        "expires_at": 1_700_000_060.5,
        "attempts": [
            {"run_id": "run-a", "index": 3, "pid": 5151, "pid_started": 1_700_000_001.75, "pid_birth": "0f3c:150"},
            {"run_id": "run-b", "index": 9, "pid": None, "pid_started": None, "pid_birth": None},
        ],
        "note": "renewed",
        "fenced": None,
        "boot": "0f3c",
        "expires_boot": 1234.5,
        "host_grace": 30.5,
    }


def test_a_reconciled_lease_keeps_who_it_fenced(tmp_path):
    """The owner a reconcile fenced out (PID, start time) survives a write and a read, as numbers."""
    reconciled = Lease(8, None, None, None, 5.0, (), "reconciled", fenced=(4242, 1_700_000_000.25))
    write_lease(tmp_path, reconciled)
    assert read_lease(tmp_path) == reconciled
    assert orjson.loads((tmp_path / LEASE).read_bytes())["fenced"] == [4242, 1_700_000_000.25]


def test_an_unowned_lease_with_no_attempts_reads_back(tmp_path):
    """An ended lease (no host, no PID, no attempts) is read as unowned with an empty tuple of attempts."""
    (tmp_path / LEASE).write_bytes(orjson.dumps({"epoch": 2, "expires_at": 5, "attempts": None}))
    lease = read_lease(tmp_path)
    assert lease == Lease(epoch=2, host=None, pid=None, pid_started=None, expires_at=5.0, attempts=(), note=None)
    assert isinstance(lease.expires_at, float) and lease.attempts == ()


def test_a_lease_without_a_host_grace_gives_other_hosts_120_s(tmp_path):
    """A lease written before ``host_grace`` existed is held by other hosts for 120 s past its expiry; one that
    states its grace is held exactly that long (0 and a day are accepted)."""
    (tmp_path / LEASE).write_bytes(orjson.dumps({"epoch": 2, "host": "h", "expires_at": 1000.0}))
    assert read_lease(tmp_path).held_elsewhere_until() == 1120.0
    for grace in (0, 86_400):
        (tmp_path / LEASE).write_bytes(
            orjson.dumps({"epoch": 2, "host": "h", "expires_at": 1000.0, "host_grace": grace})
        )
        assert read_lease(tmp_path).held_elsewhere_until() == 1000.0 + grace


def test_text_numbers_are_read_as_numbers(tmp_path):
    """An epoch, index or expiry written as text by hand is converted, not kept as a string."""
    (tmp_path / LEASE).write_bytes(
        orjson.dumps({"epoch": "3", "expires_at": "10.5", "attempts": [{"run_id": 5, "index": "2"}]})
    )
    lease = read_lease(tmp_path)
    assert lease.epoch == 3 and lease.expires_at == 10.5
    assert lease.attempts == (LeasedAttempt("5", 2, None, None),)


def test_no_file_is_no_lease(tmp_path):
    """A backfill never owned has no lease."""
    assert read_lease(tmp_path) is None


@pytest.mark.parametrize(
    ("content", "detail"),
    [
        (b"{not json", "unexpected character"),
        (b'{"expires_at": 1}', "'epoch'"),
        (b'{"epoch": 1}', "'expires_at'"),
        (b'{"epoch": "one", "expires_at": 1}', "invalid literal"),
        (b'{"epoch": 1, "expires_at": 1, "attempts": [{"index": 1}]}', "'run_id'"),
        (b'{"epoch": 1, "expires_at": 1, "attempts": [7]}', "not subscriptable"),
        (b'{"epoch": 1, "expires_at": 1, "attempts": [{"run_id": "r", "index": 1, "pid_birth": 5}]}', "pid_birth is 5"),
        (b'{"epoch": 1, "expires_at": 1, "boot": 5, "expires_boot": 2}', "boot is 5"),
        (b'{"epoch": 1, "expires_at": 1, "boot": "b", "expires_boot": "soon"}', "could not convert"),
        (b'{"epoch": 1, "expires_at": 1, "host_grace": -1}', "host_grace -1 is not a number of seconds from 0"),
        (b'{"epoch": 1, "expires_at": 1, "host_grace": 86401}', "host_grace 86401 is not a number of seconds"),
        (b'{"epoch": 1, "expires_at": 1, "host_grace": "x"}', "could not convert"),
        (b"[]", "a JSON list, not an object"),
        (b"7", "a JSON int, not an object"),
    ],
)
def test_a_damaged_lease_is_refused_with_one_line(tmp_path, content, detail):
    """Bad JSON, a missing field or a wrong type: one line naming the file and what to do."""
    (tmp_path / LEASE).write_bytes(content)
    with pytest.raises(StateUnreadable) as raised:
        read_lease(tmp_path)
    message = str(raised.value)
    assert message.startswith(f"{tmp_path / LEASE} is damaged (")
    assert detail in message
    assert message.endswith("): move it away if no executor runs this backfill")
    assert "\n" not in message


def test_an_unreadable_lease_is_refused(tmp_path):
    """A lease that is a directory (an OSError on reading) is damage, not an absent lease."""
    (tmp_path / LEASE).mkdir()
    with pytest.raises(StateUnreadable, match="is damaged"):
        read_lease(tmp_path)


def test_a_rewrite_replaces_the_whole_file(tmp_path):
    """A shorter lease written over a longer one leaves nothing of the old (atomic replace, not overwrite)."""
    write_lease(tmp_path, _owned())
    short = Lease(epoch=8, host=None, pid=None, pid_started=None, expires_at=0.0, note="ended")
    write_lease(tmp_path, short)
    assert read_lease(tmp_path) == short
    assert list(tmp_path.iterdir()) == [tmp_path / LEASE]


def test_on_this_boot_a_lease_runs_out_by_the_boot_clock_whatever_the_wall_clock_says():
    """Written on this boot: a wall clock stepped a day ahead does not expire it, one stepped back does not keep it;
    written on another boot (or host), the wall clock decides."""
    from engine.base.boot_clock import boot_id, since_boot

    now = time.time()
    live = Lease(1, "h", 1, 1.0, now + 60, boot=boot_id(), expires_boot=since_boot() + 60)
    assert not live.expired(now + 86_400)
    dead = Lease(1, "h", 1, 1.0, now + 60, boot=boot_id(), expires_boot=since_boot() - 1)
    assert dead.expired(now - 3_600)
    elsewhere = Lease(1, "h", 1, 1.0, now + 60, boot="another-boot", expires_boot=since_boot() + 60)
    assert elsewhere.expired(now + 61) and not elsewhere.expired(now + 59)
    assert Lease(1, "h", 1, 1.0, now + 60).expired(now + 61)
