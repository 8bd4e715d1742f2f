"""The PID-reuse guard, in-process against real processes: a process is named by PID *and* start time (or
birth), a handle verified once reaches only that process, and a group is reached only while one of ours anchors
it. Written as the record that lies would: a stale start time, another boot's birth, a PID that is init, ours or
our parent's, a process reaped before the signal."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from engine.base import processes
from engine.base.boot_clock import boot_id
from engine.base.processes import (
    Tracked,
    TrackedFamily,
    alive,
    exited_unreaped,
    leftovers_of,
    members_of_group,
    process_birth,
    process_group,
    process_identity,
    process_started,
    running_process,
    same_process,
    signal_own_group,
    stop_verified,
)


def sleeper(*, session: bool = True) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"], start_new_session=session)


def wait_exited(child: subprocess.Popen) -> None:
    """Block until ``child`` has exited, leaving its zombie unreaped."""
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)


def reap(child: subprocess.Popen) -> int:
    return child.wait(timeout=30)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def group() -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A shell leading its own process group with a ``sleep`` started in it; the sleep's PID, read from the
    shell's output (no waiting on time)."""
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; read x"], start_new_session=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert leader.stdout is not None
    member = int(leader.stdout.readline())
    try:
        yield leader, member
    finally:
        for pid in (member, leader.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        leader.wait(timeout=30)


def test_a_live_process_is_named_by_its_start_time_and_its_birth():
    """A child's identity: a start time within a few seconds of now, and ``<boot id>:<start ticks>``, read the
    same twice; a reaped child has none."""
    child = sleeper()
    try:
        started, birth = process_identity(child.pid)
        assert started is not None and abs(started - time.time()) < 30
        assert birth is not None and birth.startswith(boot_id() + ":") and birth.split(":")[-1].isdigit()
        assert process_identity(child.pid) == (started, birth)
        assert (process_started(child.pid), process_birth(child.pid)) == (started, birth)
    finally:
        child.kill()
        reap(child)
    assert process_identity(child.pid) == (None, None)
    assert process_started(child.pid) is None and process_birth(child.pid) is None


def test_a_start_time_is_the_one_psutil_gives_and_every_process_is_listed():
    """Read from /proc without psutil, a start time is psutil's own (the boot time from /proc/stat, to the tick),
    and the processes searched at a child's exit are every process psutil lists: records written with either agree,
    and no member of a group is missed."""
    import psutil

    from engine.base.processes import _pids

    child = sleeper()
    try:
        assert process_started(child.pid) == pytest.approx(psutil.Process(child.pid).create_time(), abs=0.011)
        theirs = psutil.pids()
        ours = set(_pids())
        missed = [pid for pid in theirs if pid not in ours and psutil.pid_exists(pid)]  # alive across both listings
        assert child.pid in ours and not missed
        assert all(pid > 0 for pid in ours)
    finally:
        child.kill()
        reap(child)


def test_same_process_holds_only_for_the_identity_that_was_recorded():
    """The recorded birth decides when there is one, whatever the start time says; without it the start time must
    be within 10 ms; without either, nothing is the recorded process."""
    child = sleeper()
    try:
        started, birth = process_identity(child.pid)
        assert same_process(child.pid, started, birth)
        assert same_process(child.pid, started)
        assert same_process(child.pid, started + 0.009)
        assert not same_process(child.pid, started + 0.011)  # another process that took the PID later
        assert not same_process(child.pid, started - 0.011)
        assert same_process(child.pid, started + 5, birth)  # the boot time moved; the birth did not
        assert not same_process(child.pid, started, birth + "1")  # a later process with that PID
        assert not same_process(child.pid, started, f"another-boot:{birth.split(':')[-1]}")
        assert not same_process(child.pid, None)
        assert same_process(child.pid, None, birth)
    finally:
        child.kill()
        reap(child)
    assert not same_process(child.pid, started, birth)  # gone: the birth cannot be read, nor the start time
    assert not same_process(child.pid, started)


@pytest.mark.parametrize("who", ["none", "zero", "init", "this process", "its parent"])
def test_no_record_names_init_this_process_or_its_parent(who):
    """A damaged record naming PID 1, this executor or its parent, with their own true identities: never ours."""
    pid = {"none": None, "zero": 0, "init": 1, "this process": os.getpid(), "its parent": os.getppid()}[who]
    identity = process_identity(pid) if pid else (None, None)
    assert not same_process(pid, *identity)
    if pid is not None and pid > 1:
        assert identity[0] is not None  # the identity was right: the PID alone refuses it
        assert Tracked.verify(pid, *identity) is None


def test_a_zombie_is_not_alive_and_is_seen_exited_without_being_reaped():
    """An exited child nobody reaped: not alive, exited (asked twice: asking does not reap it); reaped: no child
    of ours to ask about."""
    child = subprocess.Popen(["true"])
    wait_exited(child)
    assert not alive(child.pid)
    assert exited_unreaped(child.pid) is True
    assert exited_unreaped(child.pid) is True
    assert reap(child) == 0
    assert exited_unreaped(child.pid) is None
    assert not alive(child.pid)


def test_a_killed_process_not_yet_waited_for_is_itself_but_no_longer_running():
    """A process killed and not reaped keeps its PID and identity (a signal through a hold on it is harmless) but
    runs nothing: an owner in that state is gone. A stopped (SIGSTOP) process still runs: it resumes on SIGCONT."""
    child = sleeper()
    identity = process_identity(child.pid)
    try:
        os.kill(child.pid, signal.SIGSTOP)
        os.waitid(os.P_PID, child.pid, os.WSTOPPED | os.WNOWAIT)
        assert alive(child.pid) and running_process(child.pid, *identity)
        assert not running_process(child.pid, identity[0] + 5, None)  # another process's start: not it
        assert not running_process(child.pid, identity[0], f"another-boot:{identity[1].split(':')[-1]}")
        child.kill()
        wait_exited(child)
        assert same_process(child.pid, *identity)
        assert not running_process(child.pid, *identity)
    finally:
        child.kill()
        reap(child)
    assert not running_process(child.pid, *identity)


def test_without_proc_psutil_tells_a_running_process_from_a_zombie_and_a_gone_one(monkeypatch):
    """Where /proc cannot be read, ``alive`` asks psutil: a stopped process still runs, a zombie and a reaped PID
    do not."""
    monkeypatch.setattr(processes, "_stat_fields", lambda pid: None)
    child = sleeper()
    try:
        os.kill(child.pid, signal.SIGSTOP)
        os.waitid(os.P_PID, child.pid, os.WSTOPPED | os.WNOWAIT)
        assert alive(child.pid)
        child.kill()
        wait_exited(child)
        assert not alive(child.pid)
    finally:
        child.kill()
        reap(child)
    assert not alive(child.pid)


def test_a_running_child_is_alive_and_not_exited():
    """A running child: alive, not exited, its group its own."""
    child = sleeper()
    try:
        assert alive(child.pid) and exited_unreaped(child.pid) is False
        assert process_group(child.pid) == child.pid
    finally:
        child.kill()
        reap(child)
    assert process_group(child.pid) is None


def test_a_handle_is_given_only_for_the_recorded_process_and_leaks_nothing():
    """``Tracked.verify``: the recorded identity gives a handle that signals; a stale start time, a wrong birth, no
    identity at all or a bad PID give none, and the descriptor opened for the check is closed."""
    child = sleeper()
    try:
        started, birth = process_identity(child.pid)
        before = open_descriptors()
        for pid, when, born in (
            (child.pid, started + 1, None),
            (child.pid, started, "another-boot:1"),
            (child.pid, None, None),
            (None, started, birth),
            (0, started, birth),
            (-child.pid, started, birth),
        ):
            assert Tracked.verify(pid, when, born) is None
        assert open_descriptors() == before
        handle = Tracked.verify(child.pid, started, birth)
        assert handle is not None and (handle.pid, handle.started, handle.birth) == (child.pid, started, birth)
        assert handle.reachable() and handle.alive()
        assert open_descriptors() == before + 1  # it holds the process by its pidfd
        assert handle.signal(signal.SIGTERM)
        assert reap(child) == -signal.SIGTERM
        assert not handle.reachable() and not handle.alive()
        assert not handle.signal(signal.SIGTERM)  # reaped: the PID may be anyone's now
        handle.close()
        handle.close()
        assert open_descriptors() == before
    finally:
        child.kill()
        reap(child)


def test_a_handle_without_a_pidfd_checks_the_identity_before_each_signal():
    """Without pidfds (an old kernel) a handle signals only after checking again that the PID is the recorded
    process: a handle whose start time no longer matches sends nothing."""
    child = sleeper()
    try:
        started, birth = process_identity(child.pid)
        stale = Tracked(child.pid, started + 1, None)
        assert not stale.reachable() and not stale.alive()
        assert not stale.signal(signal.SIGTERM)
        assert exited_unreaped(child.pid) is False  # not signalled
        right = Tracked(child.pid, started, None, birth)
        assert right.reachable() and right.alive()
        assert right.signal(signal.SIGTERM)
        assert reap(child) == -signal.SIGTERM
        assert not right.reachable() and not right.signal(signal.SIGTERM)
    finally:
        child.kill()
        reap(child)


def test_a_handle_whose_process_exited_is_reachable_until_reaped_but_not_alive():
    """A zombie still holds its PID: the handle reaches it (a signal is harmless) but it is not alive."""
    child = subprocess.Popen(["true"])
    handle = Tracked.verify(child.pid, *process_identity(child.pid))
    assert handle is not None
    wait_exited(child)
    assert handle.reachable() and not handle.alive()
    reap(child)
    assert not handle.reachable()
    handle.close()


def test_a_group_s_members_are_found_only_while_one_of_ours_anchors_it(group):
    """The members of a group led by our child are found and held; an anchor in another group, or none that is
    verified, finds nothing, since the group's number could be anyone's."""
    leader, member = group
    anchor = Tracked.verify(leader.pid, *process_identity(leader.pid))
    assert anchor is not None
    found = members_of_group(leader.pid, [anchor])
    assert [m.pid for m in found] == [member]
    assert found[0].birth == process_birth(member)
    for held in found:
        held.close()
    assert members_of_group(leader.pid, []) == []
    elsewhere = sleeper()
    try:
        stranger = Tracked.verify(elsewhere.pid, *process_identity(elsewhere.pid))
        assert stranger is not None
        assert members_of_group(leader.pid, [stranger]) == []  # an anchor of ours, but in another group
        stranger.close()
    finally:
        elsewhere.kill()
        reap(elsewhere)
    stale = Tracked(leader.pid, process_started(leader.pid) + 1, None)  # the leader's PID, another start
    assert members_of_group(leader.pid, [stale]) == []
    anchor.close()


def test_the_anchor_itself_is_not_counted_among_the_members(group):
    """The members found are the others: the anchor, already held, is neither verified again nor returned; a
    second anchor already held is left out too."""
    leader, member = group
    anchor = Tracked.verify(leader.pid, *process_identity(leader.pid))
    held = Tracked.verify(member, *process_identity(member))
    assert anchor is not None and held is not None
    assert members_of_group(leader.pid, [anchor, held]) == []
    anchor.close()
    held.close()


def test_what_an_exited_child_left_in_its_group_is_found_before_it_is_reaped():
    """``sh -c 'sleep 60 & …'`` exits and leaves its sleep: found through the unreaped zombie, with the identity read
    at the start or read now, and stopped; nothing is found for a child with no identity."""
    child = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!"], start_new_session=True, stdout=subprocess.PIPE,
                             text=True)  # fmt: skip
    assert child.stdout is not None
    left = int(child.stdout.readline())
    identity = process_identity(child.pid)
    wait_exited(child)
    try:
        pidfd = os.pidfd_open(child.pid)
        for given in (identity, None):
            family = leftovers_of(child.pid, pidfd, given)
            assert family.pids == [left]
            family.close()
        family = leftovers_of(child.pid, None, identity)
        assert family.pids == [left]
        family.stop(grace=10)
        os.close(pidfd)
        assert not alive(left)
        assert leftovers_of(child.pid, None, (None, None)).pids == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(left, signal.SIGKILL)
        reap(child)


def test_a_family_stops_its_group_and_descendants_and_kills_what_ignores_the_term(group):
    """Stopping a tracked leader: its group's members and its descendants are signalled too, SIGTERM first and
    SIGKILL to what ignores it after the grace; the family lets go of every handle."""
    leader, member = group
    stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; echo ready; read x"], start_new_session=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"
    try:
        before = open_descriptors()
        family = TrackedFamily()
        for pid in (leader.pid, stubborn.pid):
            handle = Tracked.verify(pid, *process_identity(pid))
            assert handle is not None
            family.add(handle)
        again = Tracked.verify(leader.pid, *process_identity(leader.pid))
        assert again is not None
        family.add(again)  # already tracked: closed, not tracked twice
        assert family.pids == sorted([leader.pid, member, stubborn.pid])
        assert family.alive()
        family.stop(grace=0.5)
        assert not family.alive() and family.pids == []
        assert open_descriptors() == before
        assert reap(leader) == -signal.SIGTERM
        assert reap(stubborn) == -signal.SIGKILL
        assert not alive(member)
    finally:
        stubborn.kill()
        reap(stubborn)


def test_a_family_picks_up_a_member_that_joined_its_group_after_it_was_tracked(group):
    """A member started in a tracked group after the family was made is found at the next signal."""
    leader, member = group
    family = TrackedFamily()
    handle = Tracked.verify(leader.pid, *process_identity(leader.pid))
    assert handle is not None
    family.add(handle, with_descendants=False)
    assert family.pids == [leader.pid]
    family.signal(0)
    assert family.pids == sorted([leader.pid, member])
    family.close()


def test_a_family_takes_a_group_only_through_a_member_found_in_it(group):
    """``add_group`` with no member found leaves the group untracked: a later signal finds nothing in it. With a
    member found, the group is tracked and its other processes (the leader here) are picked up at the next
    signal; a member tracked already is not tracked twice."""
    leader, member = group
    family = TrackedFamily()
    family.add_group(leader.pid, [])
    family.signal(0)
    assert family.pids == []
    held = Tracked.verify(member, *process_identity(member))
    assert held is not None
    family.add_group(leader.pid, [held])
    assert family.pids == [member]
    family.signal(0)
    assert family.pids == sorted([leader.pid, member])
    family.close()


def test_a_process_that_is_not_a_group_leader_brings_no_group():
    """A child in this process's own group, tracked: that group (ours, pytest's) is not one to signal, so nothing
    else of it is picked up."""
    child = sleeper(session=False)
    try:
        family = TrackedFamily()
        handle = Tracked.verify(child.pid, *process_identity(child.pid))
        assert handle is not None
        family.add(handle)
        family.signal(0)
        assert family.pids == [child.pid]
        family.close()
    finally:
        child.kill()
        reap(child)


def test_stop_verified_leaves_a_reused_pid_alone():
    """Two records: one names a live process with its true identity, the other a live process with a stale start
    time (its PID reused). Only the first is stopped and named."""
    ours, stranger = sleeper(), sleeper()
    try:
        started, birth = process_identity(ours.pid)
        stranger_started, _ = process_identity(stranger.pid)
        stopped = stop_verified([(ours.pid, started, birth), (stranger.pid, stranger_started - 1, None)], grace=10)
        assert stopped == [ours.pid]
        assert reap(ours) == -signal.SIGTERM
        assert alive(stranger.pid)
    finally:
        for child in (ours, stranger):
            child.kill()
            reap(child)


def test_a_group_is_signalled_through_its_leader_only_while_it_is_unreaped(group):
    """``signal_own_group``: through the leader's pidfd the whole group gets the signal; a reaped leader's group is
    never signalled by number (the number may be anyone's now)."""
    leader, member = group
    pidfd = os.pidfd_open(leader.pid)
    try:
        signal_own_group(pidfd, leader.pid, signal.SIGTERM, reaped=True)
        assert alive(member) and alive(leader.pid)
        signal_own_group(pidfd, leader.pid, signal.SIGTERM, reaped=False)
        assert reap(leader) == -signal.SIGTERM
        assert _gone(member)
    finally:
        os.close(pidfd)


def test_a_group_is_signalled_by_number_without_a_pidfd(group):
    """Without a pidfd (or a kernel without the group flag) the unreaped leader's group is signalled by number."""
    leader, member = group
    signal_own_group(None, leader.pid, signal.SIGTERM, reaped=False)
    assert reap(leader) == -signal.SIGTERM
    assert _gone(member)


def test_a_kernel_without_the_group_flag_falls_back_to_the_group_s_number(group, monkeypatch):
    """``pidfd_send_signal`` refusing the group flag (EINVAL, a kernel before 6.9) falls back to the number while
    the leader is unreaped; another error is raised, not swallowed."""
    import errno

    leader, member = group
    pidfd = os.pidfd_open(leader.pid)

    def refuse(fd, signum, info=None, flags=0, *, code=errno.EINVAL):
        raise OSError(code, os.strerror(code))

    try:
        monkeypatch.setattr(processes.signal, "pidfd_send_signal", refuse)
        signal_own_group(pidfd, leader.pid, signal.SIGTERM, reaped=False)
        assert reap(leader) == -signal.SIGTERM
        assert _gone(member)
        monkeypatch.setattr(processes.signal, "pidfd_send_signal",
                            lambda *a, **k: refuse(*a, code=errno.EBADF))  # fmt: skip
        with pytest.raises(OSError):
            signal_own_group(pidfd, leader.pid, signal.SIGTERM, reaped=False)
    finally:
        os.close(pidfd)


def _gone(pid: int) -> bool:
    """Whether ``pid`` (not our child: a grandchild the init process reaps) ended, waiting for it by its pidfd."""
    import select

    try:
        descriptor = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([descriptor], [], [], 10)[0])
    finally:
        os.close(descriptor)


def test_a_program_with_a_parenthesis_in_its_name_is_read_past_its_name(tmp_path):
    """``/proc/<pid>/stat`` puts the program's name in parentheses, and a name may hold ``)`` and spaces: the start
    ticks are read after the *last* one, and agree with psutil's start time."""
    import psutil

    odd = tmp_path / "x) 1 2 (3"
    odd.symlink_to("/bin/sleep")
    child = subprocess.Popen([str(odd), "60"], start_new_session=True)
    try:
        started, birth = process_identity(child.pid)
        assert started is not None and abs(started - psutil.Process(child.pid).create_time()) < 0.02
        assert birth is not None  # read from /proc, not psutil's start time alone
        assert same_process(child.pid, started, birth)
    finally:
        child.kill()
        reap(child)


def test_the_boot_time_is_read_once_when_first_needed(monkeypatch):
    """No boot time read yet: the first identity reads it (psutil's) and keeps it."""
    import psutil

    monkeypatch.setattr(processes, "_BOOT_TIME", None)
    child = sleeper()
    try:
        started, _ = process_identity(child.pid)
        assert psutil.boot_time() == processes._BOOT_TIME
        assert started is not None and abs(started - psutil.Process(child.pid).create_time()) < 0.02
    finally:
        child.kill()
        reap(child)


def test_the_boot_time_is_read_again_after_the_wall_clock_stepped(monkeypatch):
    """A boot time read before the wall clock stepped 7 s forward (a VM restored from a snapshot: seen in CI) is
    read again: a child launched after the step starts when psutil says, not 7 s before its own launch, and the
    record naming it is one of ours. While the clock does not step, it is not read again."""
    import psutil

    from engine.base.boot_clock import since_boot
    from engine.store.records import Attempt, RecordStatus

    processes._boot_time()
    monkeypatch.setattr(processes, "_BOOT_TIME", processes._BOOT_TIME - 7)
    monkeypatch.setattr(processes, "_BOOT_OFFSET", time.time() - since_boot() - 7)
    launched = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    child = sleeper()
    try:
        started, birth = process_identity(child.pid)
        assert started == pytest.approx(psutil.Process(child.pid).create_time(), abs=0.011)
        attempt = Attempt(run_id="r", status=RecordStatus.RUNNING, started_at=launched, pid=child.pid,
                          pid_started=started, pid_birth=birth)  # fmt: skip
        assert attempt.child() == (child.pid, started, birth)
        assert pytest.approx(time.time() - since_boot(), abs=0.01) == processes._BOOT_OFFSET  # what was read
        reads = []
        monkeypatch.setattr(processes, "_read_boot_time", lambda: reads.append(1) or 0.0)
        assert process_identity(child.pid) == (started, birth) and reads == []
    finally:
        child.kill()
        reap(child)


def test_the_ancestors_are_every_parent_up_to_init_and_none_is_a_recorded_process():
    """This process's ancestors, as psutil walks them (init left out): each is never taken for a recorded
    process, whatever its identity."""
    import psutil

    expected = {parent.pid for parent in psutil.Process().parents() if parent.pid > 1}
    assert processes.ancestors() == expected
    for pid in expected:
        assert not same_process(pid, *process_identity(pid))


def test_no_ancestor_is_ever_taken_for_a_recorded_process():
    """Asked from its grandchild (through a shell that does not exec it away), this test process is an ancestor and
    never the recorded process, whatever its identity: a shell that exported ``BACKFILL_ID`` two levels up would
    otherwise be stopped by the command it ran. A sibling with its identity is the recorded process."""
    from pathlib import Path

    code = (
        "import sys\nfrom engine.base.processes import ancestors, process_identity, same_process\n"
        "for pid in map(int, sys.argv[1:]): print(same_process(pid, *process_identity(pid)), pid in ancestors())"
    )
    child = sleeper()
    try:
        asked = subprocess.run(
            ["sh", "-c", f'"{sys.executable}" -c "$0" "$@"; :', code, str(os.getpid()), str(child.pid)],
            cwd=Path(__file__).parents[2], capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert asked.stdout == "False True\nTrue False\n", asked.stderr
    finally:
        child.kill()
        reap(child)


def test_a_step_is_a_move_past_the_jitter_of_two_clock_reads_or_across_a_whole_second():
    """The kernel's boot time is the whole seconds of the wall clock's offset from the boot clock: a move of that
    offset past a millisecond is a step, and so is any move that crosses a whole second (the boot time changed)."""
    assert not processes._stepped(1000.5, 1000.5009) and not processes._stepped(1000.5, 1000.4991)
    assert processes._stepped(1000.5, 1000.5011) and processes._stepped(1000.5, 1000.4989)
    assert processes._stepped(1000.9999, 1001.0001) and processes._stepped(1001.0001, 1000.9999)


def test_with_proc_readable_psutil_is_never_asked(monkeypatch):
    """The boot time, the listing of processes and whether one runs come from /proc where it can be read: psutil
    (9 ms to import, before a new backfill's first frame) is the fallback, not the source."""
    import psutil

    def refused(*args, **kwargs):
        raise AssertionError("psutil asked where /proc answers")

    for name in ("boot_time", "pids", "Process"):
        monkeypatch.setattr(psutil, name, refused)
    monkeypatch.setattr(processes, "_BOOT_TIME", None)
    with open("/proc/stat", "rb") as stat:
        booted = next(float(line.split()[1]) for line in stat if line.startswith(b"btime "))
    child = sleeper()
    try:
        started, _ = process_identity(child.pid)
        assert booted == processes._BOOT_TIME and started is not None
        assert child.pid in processes._pids() and alive(child.pid)
    finally:
        child.kill()
        reap(child)


def test_without_a_boot_id_a_process_has_no_birth_and_its_start_time_names_it(monkeypatch):
    """Where there is no boot ID the birth would be ``:<ticks>``, the same for two boots: there is none, and the
    start time alone names the process."""
    monkeypatch.setattr(processes, "boot_id", lambda: "")
    child = sleeper()
    try:
        started, birth = process_identity(child.pid)
        assert birth is None and process_birth(child.pid) is None
        assert same_process(child.pid, started) and not same_process(child.pid, started + 1)
    finally:
        child.kill()
        reap(child)


def test_a_handle_is_given_for_a_start_time_alone_or_a_birth_alone():
    """A record of an older version has a start time and no birth; another read has a birth and no start time:
    either names the process, and each is checked."""
    child = sleeper()
    try:
        started, birth = process_identity(child.pid)
        for when, born in ((started, None), (None, birth)):
            handle = Tracked.verify(child.pid, when, born)
            assert handle is not None
            handle.close()
        assert Tracked.verify(child.pid, started + 1, None) is None
        assert Tracked.verify(child.pid, None, "another-boot:1") is None
        assert stop_verified([(child.pid, started, None)], grace=10) == [child.pid]
        assert reap(child) == -signal.SIGTERM
    finally:
        child.kill()
        reap(child)


@pytest.mark.parametrize("recorded", ["start time only", "birth with a moved start time"])
def test_without_a_pidfd_each_signal_checks_the_whole_recorded_identity(recorded):
    """A handle without a pidfd checks again before each signal with what was recorded: a start time alone (no
    birth), or a birth whose start time the boot clock has moved since (the birth decides)."""
    child = sleeper()
    try:
        started, birth = process_identity(child.pid)
        handle = Tracked(child.pid, started, None) if recorded == "start time only" else (
            Tracked(child.pid, started + 5, None, birth))  # fmt: skip
        assert handle.reachable() and handle.alive()
        assert handle.signal(signal.SIGTERM)
        assert reap(child) == -signal.SIGTERM
    finally:
        child.kill()
        reap(child)


def test_a_process_we_may_not_signal_still_counts_as_reachable(monkeypatch):
    """A pidfd whose process refuses our signal (another user's, EPERM) still names a live process: reachable, and
    a signal to it says it was not delivered, without raising."""
    child = sleeper()
    try:
        handle = Tracked.verify(child.pid, *process_identity(child.pid))
        assert handle is not None

        def refused(*args, **kwargs):
            raise PermissionError(1, "Operation not permitted")

        monkeypatch.setattr(processes.signal, "pidfd_send_signal", refused)
        assert handle.reachable()
        assert not handle.signal(signal.SIGTERM)
        handle.close()
    finally:
        child.kill()
        reap(child)


@pytest.fixture
def two_members() -> Iterator[tuple[subprocess.Popen[str], list[int]]]:
    """A shell leading its own group with two ``sleep``s in it, which it reaps as they end."""
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; sleep 60 & echo $!; wait"], start_new_session=True,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert leader.stdout is not None
    members = sorted(int(leader.stdout.readline()) for _ in range(2))
    try:
        yield leader, members
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader.pid, signal.SIGKILL)
        leader.wait(timeout=30)


def test_a_member_that_ends_before_it_is_held_does_not_hide_the_others(two_members, monkeypatch):
    """The group's first member ends (and is reaped) between the listing and its hold: it is passed over, and the
    member after it is still found."""
    leader, (first, second) = two_members
    real = Tracked.verify.__func__

    def ends_first(cls, pid, started, birth=None):
        if pid == first:
            os.kill(first, signal.SIGKILL)
            assert _gone(first)
            while os.path.exists(f"/proc/{first}"):  # the shell reaps it: then nothing of it is left to hold
                os.sched_yield()
        return real(cls, pid, started, birth)

    anchor = Tracked.verify(leader.pid, *process_identity(leader.pid))
    assert anchor is not None
    monkeypatch.setattr(Tracked, "verify", classmethod(ends_first))
    found = members_of_group(leader.pid, [anchor])
    assert [m.pid for m in found] == [second]
    for held in [*found, anchor]:
        held.close()


def test_a_member_that_leaves_the_group_before_it_is_held_is_not_taken(tmp_path, monkeypatch):
    """A member that starts a session of its own (``setsid``) between the listing and its hold is no longer of the
    group: it is let go, not signalled with the group."""
    script = "import os, signal\nsignal.signal(signal.SIGUSR1, lambda *a: os.setsid())\nprint('ready', flush=True)\n"
    script += "while True:\n    signal.pause()\n"
    leader = subprocess.Popen(["sh", "-c", f'{sys.executable} -c "$0" & echo $!; wait', script],
                              start_new_session=True, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert leader.stdout is not None
    member = int(leader.stdout.readline())
    assert leader.stdout.readline() == "ready\n"
    real = Tracked.verify.__func__

    def leaves(cls, pid, started, birth=None):
        held = real(cls, pid, started, birth)
        if pid == member:
            os.kill(member, signal.SIGUSR1)
            while process_group(member) not in (member, None):
                os.sched_yield()
            assert process_group(member) == member
        return held

    try:
        anchor = Tracked.verify(leader.pid, *process_identity(leader.pid))
        assert anchor is not None
        monkeypatch.setattr(Tracked, "verify", classmethod(leaves))
        assert members_of_group(leader.pid, [anchor]) == []
        anchor.close()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader.pid, signal.SIGKILL)
        leader.wait(timeout=30)


@pytest.mark.parametrize(
    "held",
    [
        "by its pidfd, its start time read again moved",
        "without a pidfd, by its start time",
        "without a pidfd, by its birth, its start time moved",
        "by its pidfd, identity read now",
    ],
)
def test_what_a_child_left_is_found_however_the_child_is_held(held):
    """``leftovers_of`` finds the sleep an exited child left: held by a pidfd (then the identity given is not what
    reaches it: a boot clock that moved since does not matter), or without one by the identity given (a start time
    alone, or a birth that outweighs a moved start time), or by its identity read now. The group is tracked too: a
    process started in it later is picked up at the next signal."""
    script = "sleep 60 & echo $!; read x; sleep 60 & echo $!; read x"
    child = subprocess.Popen(["sh", "-c", script], start_new_session=True, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert child.stdout is not None and child.stdin is not None
    left = int(child.stdout.readline())
    started, birth = process_identity(child.pid)
    pidfd = os.pidfd_open(child.pid)
    try:
        family = {
            "by its pidfd, its start time read again moved": lambda: leftovers_of(
                child.pid, pidfd, (started + 5, None)
            ),
            "without a pidfd, by its start time": lambda: leftovers_of(child.pid, None, (started, None)),
            "without a pidfd, by its birth, its start time moved": lambda: leftovers_of(
                child.pid, None, (started + 5, birth)
            ),
            "by its pidfd, identity read now": lambda: leftovers_of(child.pid, pidfd),
        }[held]()
        assert family.pids == [left]
        child.stdin.write("\n")
        child.stdin.flush()
        later = int(child.stdout.readline())
        family.signal(0)
        assert family.pids == sorted([child.pid, left, later])
        family.close()
    finally:
        os.close(pidfd)
        os.killpg(child.pid, signal.SIGKILL)
        reap(child)


def test_letting_leftovers_go_never_takes_our_own_child_s_exit_status():
    """What an exited child of ours left is stopped and let go (reaped, were we its reaper): the child itself is
    not in that family, so its exit status is still ours to read, 3, not the 0 a stolen one reads as."""
    child = subprocess.Popen(["sh", "-c", "sleep 60 & exit 3"], start_new_session=True)
    pidfd = os.pidfd_open(child.pid)
    try:
        wait_exited(child)
        family = leftovers_of(child.pid, pidfd)
        assert len(family.pids) == 1 and child.pid not in family.pids
        family.stop(5)
        assert child.wait(timeout=10) == 3
    finally:
        os.close(pidfd)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        reap(child)


def test_without_a_pidfd_or_an_identity_read_now_the_leftovers_are_still_found():
    """No pidfd and no identity given: the child's identity is read now, and what it left is found."""
    child = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; read x"], start_new_session=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert child.stdout is not None
    left = int(child.stdout.readline())
    try:
        family = leftovers_of(child.pid, None)
        assert family.pids == [left]
        family.close()
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        reap(child)


def test_a_family_tracks_every_descendant_however_deep_and_in_whatever_group():
    """A tracked process's descendants are tracked as they are now, grandchildren in a session of their own
    included (before any signal refreshes a group)."""
    child = subprocess.Popen(["sh", "-c", "setsid sh -c 'sleep 60 & echo $!; wait' & wait"], start_new_session=True,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert child.stdout is not None
    grandchild = int(child.stdout.readline())
    try:
        handle = Tracked.verify(child.pid, *process_identity(child.pid))
        assert handle is not None
        family = TrackedFamily()
        family.add(handle)
        assert grandchild in family.pids and len(family.pids) == 3
        family.stop(grace=10)
        assert not alive(grandchild)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(grandchild, signal.SIGKILL)
        child.kill()
        reap(child)


def test_a_leader_tracked_without_its_group_brings_no_member(group):
    """``add(…, with_group=False)``: the leader alone is tracked; its group's members are not picked up."""
    leader, _ = group
    handle = Tracked.verify(leader.pid, *process_identity(leader.pid))
    assert handle is not None
    family = TrackedFamily()
    family.add(handle, with_group=False, with_descendants=False)
    family.signal(0)
    assert family.pids == [leader.pid]
    family.close()


def test_a_process_reaped_before_it_is_added_is_tracked_without_descendants():
    """A handle whose process ended and was reaped before ``add``: no descendants to list, nothing raised."""
    child = sleeper()
    handle = Tracked.verify(child.pid, *process_identity(child.pid))
    assert handle is not None
    child.kill()
    reap(child)
    family = TrackedFamily()
    family.add(handle)
    assert family.pids == [child.pid] and not family.alive()
    family.close()


def test_stopping_waits_for_a_process_that_takes_its_time_to_end():
    """A process that takes a moment to end after SIGTERM (its own clean-up) is waited for within the grace, not
    killed: it ends by its own exit."""
    child = subprocess.Popen(["sh", "-c", "trap 'sleep 0.3; exit 7' TERM; echo ready; while :; do sleep 1; done"],
                             start_new_session=True, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    try:
        family = TrackedFamily()
        handle = Tracked.verify(child.pid, *process_identity(child.pid))
        assert handle is not None
        family.add(handle)
        family.stop(grace=30)
        assert reap(child) == 7
    finally:
        child.kill()
        reap(child)


def test_signalling_a_group_that_does_not_exist_raises_nothing(monkeypatch):
    """A child that leads no group, signalled by group number: no such group, nothing raised, the child untouched;
    a group we may not signal (EPERM) raises nothing either."""
    child = sleeper(session=False)
    try:
        signal_own_group(None, child.pid, signal.SIGTERM, reaped=False)
        assert alive(child.pid)

        def refused(*args):
            raise PermissionError(1, "Operation not permitted")

        monkeypatch.setattr(processes.os, "killpg", refused)
        signal_own_group(None, child.pid, signal.SIGTERM, reaped=False)
        assert alive(child.pid)
    finally:
        child.kill()
        reap(child)


def test_what_a_leftover_started_in_a_session_of_its_own_is_stopped_with_it():
    """A child leaves a background shell in its group, and that shell has started a ``setsid`` process, in a
    session of its own and so in no group of ours: it is found through the leftover that started it, and stopped
    with it. Left running, it would go on beside the partition's next attempt."""
    script = "sh -c 'setsid sleep 60 & echo $!; wait' & read x"
    child = subprocess.Popen(["sh", "-c", script], start_new_session=True, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert child.stdout is not None and child.stdin is not None
    escaped = int(child.stdout.readline())
    while process_group(escaped) != escaped:  # setsid has run
        os.sched_yield()
    try:
        child.stdin.close()  # the child ends, leaving the shell and what it started
        wait_exited(child)
        family = leftovers_of(child.pid, None)
        assert escaped in family.pids and len(family.pids) == 2
        family.stop(grace=10)
        assert _gone(escaped)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(escaped, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        reap(child)
