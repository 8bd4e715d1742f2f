"""The state store's reserve: real blocks kept aside, given back once, never left behind when it cannot be held."""

from __future__ import annotations

import os

import pytest

from engine.store.space_reserve import BASE_BYTES, MOST_BYTES, PER_CHILD_BYTES, RESERVE, SpaceReserve, reserve_size


def test_the_reserve_grows_with_the_children_up_to_a_cap():
    """64 KiB and 8 KiB per child running at once (at least one), never over 4 MiB."""
    assert reserve_size(0) == reserve_size(1) == BASE_BYTES + PER_CHILD_BYTES == 72 * 1024
    assert reserve_size(4) == 96 * 1024
    assert reserve_size(10_000) == MOST_BYTES == 4 * 1024 * 1024


def test_a_held_reserve_is_real_blocks_and_is_given_back_once(tmp_path):
    """Held: a file of the size with its blocks allocated (not sparse); released: gone, and a second release has
    nothing to give."""
    reserve = SpaceReserve(tmp_path, 96 * 1024)
    reserve.hold()
    path = tmp_path / RESERVE
    assert reserve.held and path.stat().st_size == 96 * 1024 and path.stat().st_blocks * 512 >= 96 * 1024
    assert reserve.release() is True
    assert not path.exists() and not reserve.held
    assert reserve.release() is False


def test_a_reserve_left_by_a_crash_is_held_again_and_one_removed_by_hand_gives_nothing(tmp_path):
    """A .reserve already there (a killed executor's) is reused; one deleted under us is no room to give."""
    (tmp_path / RESERVE).write_bytes(b"\0" * 10)
    reserve = SpaceReserve(tmp_path, 8192)
    reserve.hold()
    assert (tmp_path / RESERVE).stat().st_size == 8192
    (tmp_path / RESERVE).unlink()
    assert reserve.release() is False


def test_no_room_for_the_reserve_raises_and_leaves_no_file(tiny_disk):
    """On a disk without room the hold fails with ENOSPC and leaves neither the file nor a held reserve."""
    reserve = SpaceReserve(tiny_disk, 1024 * 1024)
    with pytest.raises(OSError) as raised:
        reserve.hold()
    assert raised.value.errno == 28 and not (tiny_disk / RESERVE).exists() and not reserve.held


def test_where_fallocate_is_not_supported_the_reserve_is_written_out(tmp_path, monkeypatch):
    """A filesystem without fallocate (EOPNOTSUPP): the reserve is written as zeros instead, whole, readable only
    by its owner."""
    import errno

    def unsupported(descriptor: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, "not supported")

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    SpaceReserve(tmp_path, 12_345).hold()
    path = tmp_path / RESERVE
    assert path.read_bytes() == b"\0" * 12_345 and path.stat().st_mode & 0o777 == 0o600


def test_a_held_reserve_grows_in_place_for_more_children(tmp_path):
    """More children at once (a live --max-parallel): the reserve grows to the new size, in real blocks."""
    reserve = SpaceReserve(tmp_path, 72 * 1024)
    reserve.hold()
    reserve.grow(200 * 1024)
    path = tmp_path / RESERVE
    assert reserve.size == 200 * 1024 and path.stat().st_size == 200 * 1024
    assert path.stat().st_blocks * 512 >= 200 * 1024 and reserve.held


def test_a_reserve_that_cannot_grow_keeps_what_it_held(tiny_disk):
    """No room to grow: ENOSPC, and the reserve already held stays there and held, its size as it was."""
    reserve = SpaceReserve(tiny_disk, 8 * 1024)
    reserve.hold()
    with pytest.raises(OSError) as raised:
        reserve.grow(1024 * 1024)
    assert raised.value.errno == 28
    assert reserve.held and reserve.size == 8 * 1024 and (tiny_disk / RESERVE).exists()


def test_where_fallocate_is_not_supported_the_reserve_grows_by_writing_zeros(tmp_path, monkeypatch):
    """Without fallocate the missing bytes are written after those held: the file is the new size, all zeros."""
    import errno

    reserve = SpaceReserve(tmp_path, 1000)
    reserve.hold()

    def unsupported(descriptor: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, "not supported")

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    reserve.grow(3000)
    assert (tmp_path / RESERVE).read_bytes() == b"\0" * 3000 and reserve.size == 3000
