"""The user's state directory (engine/store/user_state.py): where it is, and the one check that it can be used
before the registry of running work or the list of paused pipelines is written there."""

from __future__ import annotations

import stat

import pytest

from engine.base.errors import BadInput
from engine.store.user_state import usable, user_state_dir


def test_the_user_state_directory_is_under_xdg_state_home(tmp_path, monkeypatch):
    """XDG_STATE_HOME decides where every store of this machine shares its registry and pauses."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert user_state_dir() == tmp_path / "state" / "backfill"


def test_a_usable_directory_is_made_with_a_lock_file_only_its_owner_can_read(tmp_path):
    """A missing directory (and its parents) is made and returned, with its ``.lock`` created private (0600)."""
    directory = tmp_path / "a" / "b" / "live"
    assert usable(directory, "the registry of running work") == directory
    lock = directory / ".lock"
    assert lock.is_file() and stat.S_IMODE(lock.stat().st_mode) == 0o600
    lock.write_text("kept")
    assert usable(directory, "the registry of running work") == directory
    assert lock.read_text() == "kept"  # an existing lock file is opened, never truncated


@pytest.mark.parametrize("in_the_way", ["state", "lock"])
def test_a_directory_that_cannot_be_used_is_bad_input_naming_it_and_the_variable(tmp_path, in_the_way):
    """XDG_STATE_HOME naming a file, or a directory where the lock file goes: one line naming what it is for, the
    directory, the system's reason and XDG_STATE_HOME — not a bare OS error."""
    directory = tmp_path / "state" / "live"
    if in_the_way == "state":
        (tmp_path / "state").write_text("a file")
    else:
        (directory / ".lock").mkdir(parents=True)
    reason = "Not a directory" if in_the_way == "state" else "Is a directory"
    with pytest.raises(BadInput) as refused:
        usable(directory, "the registry of running work")
    assert str(refused.value) == (
        f"the registry of running work, {directory}, cannot be used ({reason}): it is under XDG_STATE_HOME (else "
        "~/.local/state); point XDG_STATE_HOME at a writable directory"
    )
