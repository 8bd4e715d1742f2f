"""Finding a saved backfill by ID or unique prefix over real state stores: an exact ID wins wherever it is, a
unique prefix finds it, an ambiguous or unknown one is one message naming the stores searched and the
candidates, and an ID that could walk out of the store is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.base.errors import BadInput
from engine.store.locate import locate_backfill, searched_roots, state_root_of_cwd
from engine.store.state_store import default_state_root
from tests.saved_backfills import saved_command_backfill


@pytest.fixture
def outside(tmp_path, monkeypatch) -> Path:
    """A working directory outside any repository, with the user state directory inside the test's space."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    work = tmp_path / "work"
    work.mkdir()
    return work


def test_the_roots_searched(outside, tmp_path):
    """--state-dir alone (relative to the working directory); in a repository its store, then the user's; outside
    one, the user's only. `list` browses --state-dir, else the repository's, else the user's."""
    assert searched_roots("states", outside) == [(outside / "states").resolve()]
    assert searched_roots(None, outside) == [default_state_root(None)]
    repository = tmp_path / "repo"
    (repository / ".git").mkdir(parents=True)
    assert searched_roots(None, repository) == [default_state_root(repository), default_state_root(None)]
    assert state_root_of_cwd("states", outside) == (outside / "states").resolve()
    assert state_root_of_cwd(None, repository) == default_state_root(repository)
    assert state_root_of_cwd(None, outside) == default_state_root(None)


def test_an_exact_id_a_unique_prefix_and_the_root_it_was_found_in(outside):
    """The exact ID and a unique prefix both find the backfill, with the root it lives in."""
    saved = saved_command_backfill(outside, end="2024-01-03")
    root = saved.store.directory.parent
    store, found_in = locate_backfill(saved.store.id, "states", outside)
    assert store.directory == saved.store.directory and found_in == root
    store, found_in = locate_backfill(saved.store.id[:12], "states", outside)
    assert store.directory == saved.store.directory and found_in == root


def test_an_exact_id_wins_over_a_longer_one_it_prefixes(outside):
    """An ID that is also the prefix of another backfill's ID is that backfill, not an ambiguity."""
    saved = saved_command_backfill(outside, end="2024-01-03")
    twin = saved.store.directory.parent / (saved.store.id + "x")
    os.rename(saved_command_backfill(outside, end="2024-01-04").store.directory, twin)
    store, _ = locate_backfill(saved.store.id, "states", outside)
    assert store.directory == saved.store.directory


def test_an_ambiguous_prefix_lists_the_candidates(outside):
    """Two backfills sharing the prefix: one message, the store searched, both candidates with their target."""
    first = saved_command_backfill(outside, end="2024-01-03")
    second = saved_command_backfill(outside, end="2024-01-04")
    length = next(i for i, (a, b) in enumerate(zip(first.store.id, second.store.id, strict=False)) if a != b)
    common = first.store.id[:length]
    with pytest.raises(BadInput) as refused:
        locate_backfill(common, "states", outside)
    message = str(refused.value)
    assert message.startswith(f"backfill ID {common!r} is ambiguous: give more characters. Searched ")
    assert str(first.store.directory.parent) in message
    assert first.store.id in message and second.store.id in message and " true " in message


def test_an_unknown_id_names_the_stores_and_the_most_recent(outside):
    """No such backfill: the stores searched, the most recent backfills (by ID, newest first; an unreadable one
    marked), and how to find the right store."""
    older = saved_command_backfill(outside, end="2024-01-03")
    newer = saved_command_backfill(outside, end="2024-01-04")
    (newer.store.directory / "manifest.json").write_text("{")  # unreadable now
    with pytest.raises(BadInput) as refused:
        locate_backfill("nothing-like-it", "states", outside)
    lines = str(refused.value).splitlines()
    assert lines[0].startswith("no backfill 'nothing-like-it'. Searched ") and lines[0].endswith("; the most recent:")
    listed = sorted([older.store.id, newer.store.id], reverse=True)
    assert [line.split()[0] for line in lines[1:3]] == listed
    assert f"  {newer.store.id}  (unreadable)  {newer.store.directory}" in lines
    assert any(line.startswith(f"  {older.store.id}  true  created 20") for line in lines)
    assert lines[-1] == "run from the repository it was started in, or pass the same --state-dir"


def test_an_unknown_id_in_an_empty_store_says_so(outside):
    """With nothing saved at all, one line: the stores searched and how to find the right one, nothing listed."""
    with pytest.raises(BadInput) as refused:
        locate_backfill("abc", "states", outside)
    assert str(refused.value) == (
        f"no backfill 'abc' in {(outside / 'states').resolve()}: run from the repository it was started in, or "
        "pass the same --state-dir"
    )


@pytest.mark.parametrize("bad", ["", "../etc", "a/b", ".hidden"])
def test_an_id_that_could_leave_the_store_is_refused(outside, bad):
    """An empty ID, a path or a hidden name is not an ID: one line, nothing read."""
    with pytest.raises(BadInput, match="is not a backfill ID: use the ID printed when it started"):
        locate_backfill(bad, "states", outside)


def test_long_lists_are_cut_and_every_store_is_named(tmp_path, monkeypatch):
    """From a repository both stores are searched and named; an ambiguous prefix lists ten candidates, an
    unknown ID the five most recent, each with its creation time to the minute."""
    import re

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    repository = tmp_path / "repo"
    (repository / ".git").mkdir(parents=True)
    saved = [saved_command_backfill(repository, end="2024-01-02") for _ in range(11)]
    roots = searched_roots(None, repository)
    for backfill in saved:  # into the repository's own store, where a command run there looks first
        roots[0].mkdir(parents=True, exist_ok=True)
        os.rename(backfill.store.directory, roots[0] / backfill.store.id)
    with pytest.raises(BadInput) as ambiguous:
        locate_backfill(saved[0].store.id[:4], None, repository)
    lines = str(ambiguous.value).splitlines()
    assert f"Searched {roots[0]}, {roots[1]}; candidates:" in lines[0]
    assert len(lines) == 11
    assert all(re.fullmatch(r"  \S+  true  created \d{4}-\d\d-\d\d \d\d:\d\d  incomplete", line) for line in lines[1:])
    with pytest.raises(BadInput) as unknown:
        locate_backfill("zzz", None, repository)
    lines = str(unknown.value).splitlines()
    assert len(lines) == 7 and lines[-1].startswith("run from the repository")


def test_the_most_recent_are_the_newest_ids_whichever_store_holds_them(tmp_path, monkeypatch):
    """Across the repository's store and the user's, the most recent are ordered by ID (its creation time),
    not by where they are stored."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    repository = tmp_path / "repo"
    (repository / ".git").mkdir(parents=True)
    roots = searched_roots(None, repository)
    low, high = sorted(
        (saved_command_backfill(repository, end="2024-01-02") for _ in range(2)), key=lambda b: b.store.id
    )
    for backfill, root in ((high, roots[0]), (low, roots[1])):  # the newer in the store whose path sorts first
        root.mkdir(parents=True, exist_ok=True)
        os.rename(backfill.store.directory, root / backfill.store.id)
    assert str(roots[0]) < str(roots[1])
    with pytest.raises(BadInput) as unknown:
        locate_backfill("zzz", None, repository)
    lines = str(unknown.value).splitlines()
    assert [line.split()[0] for line in lines[1:3]] == [high.store.id, low.store.id]
