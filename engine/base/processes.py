"""Processes we started, identified by PID *and* start time, so that a reused PID is never signalled.

Every signal to a process that is not our own unreaped child goes through a :class:`Tracked` handle: a pidfd
(Linux ≥ 5.3) opened *before* the start time is checked, so the descriptor surely names the verified process and
a signal through it can never reach a process that later took the same PID. Without pidfds the identity is
checked again immediately before each signal. A process group is reached through its members: the group's
number cannot be reused while one of them lives, and each member found is held by its own pidfd.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from collections.abc import Iterable

from engine.base.boot_clock import boot_id, since_boot

_BOOT_TIME: float | None = None
_BOOT_OFFSET: float | None = None  # the wall clock less the boot clock when _BOOT_TIME was read
BOOT_OFFSET_JITTER = 0.001  # seconds: reading the two clocks one after the other moves their difference less
PIDFD_SIGNAL_PROCESS_GROUP = 1 << 2  # linux/pidfd.h: signal the target's process group (Linux ≥ 6.9)
KILLED_WAIT = 1.0  # seconds a SIGKILLed leftover is given to die, to be reaped (one in uninterruptible sleep is not)
SAME_START = 0.01  # seconds: two start times closer than this are one process (the clock tick is 10 ms)


def _stat_fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command's name (the state first), or None."""
    try:
        descriptor = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(descriptor, 4096).rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    finally:
        os.close(descriptor)


def _stat_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat``): exact, and no clock step moves it."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields is not None else None
    except (IndexError, ValueError):
        return None


def _birth_of(ticks: int) -> str | None:
    boot = boot_id()
    return f"{boot}:{ticks}" if boot else None


def process_identity(pid: int) -> tuple[float | None, str | None]:
    """What names a live process for good, read once: its start time (Unix seconds, as psutil computes it: shown,
    and compared with launch times) and its birth, ``<boot id>:<start ticks>`` (Linux), None elsewhere.

    The start time is derived from the boot time the kernel reports, which follows the wall clock: a step of the
    clock (``date -s``, a VM restored from a snapshot) moves it by the step, and two processes reading it on either
    side of one disagree about one child. The birth never moves, so identities are compared by it wherever both
    sides have one."""
    ticks = _stat_ticks(pid)
    if ticks is None:  # no /proc: psutil's start time alone
        import psutil

        try:
            return psutil.Process(pid).create_time(), None
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return None, None
    return _boot_time() + ticks / os.sysconf("SC_CLK_TCK"), _birth_of(ticks)


def _boot_time() -> float:
    """The kernel's boot time, read again whenever the wall clock has stepped since the last read.

    The kernel derives it from the wall clock's offset from the boot clock, which only a step moves (``date -s``, a
    VM restored from a snapshot, a resumed container): kept from before a step, it would put a child launched after
    the step seconds before its own launch, and the record naming it would be refused as not ours. The offset costs
    two clock reads; ``/proc/stat`` is read again only when it moved (or crossed a whole second, which a
    sub-millisecond step can)."""
    global _BOOT_TIME, _BOOT_OFFSET
    offset = time.time() - since_boot()
    if _BOOT_TIME is None or _BOOT_OFFSET is None or _stepped(_BOOT_OFFSET, offset):
        _BOOT_TIME, _BOOT_OFFSET = _read_boot_time(), offset
    return _BOOT_TIME


def _stepped(before: float, now: float) -> bool:
    return abs(now - before) > BOOT_OFFSET_JITTER or int(now) != int(before)


def _read_boot_time() -> float:
    """The kernel's boot time, ``btime`` in /proc/stat, read as psutil.boot_time reads it on Linux: psutil itself
    (9 ms to import, in every new backfill's first launch, before its dashboard's first frame) only without it."""
    try:
        with open("/proc/stat", "rb") as stat:
            for line in stat:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except (OSError, IndexError, ValueError):
        pass
    import psutil

    return psutil.boot_time()


def _pids() -> list[int]:
    """Every process's PID: a listing of /proc, as psutil.pids lists them on Linux (psutil itself only without)."""
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        import psutil

        return psutil.pids()


def process_started(pid: int) -> float | None:
    """The start time of a live process, as psutil computes it (boot time + start ticks), or None.

    On Linux the boot time is read once and ``/proc/<pid>/stat`` once per call: this runs for
    every child the executor starts.
    """
    return process_identity(pid)[0]


def process_birth(pid: int) -> str | None:
    """The birth of a live process (see :func:`process_identity`), or None."""
    ticks = _stat_ticks(pid)
    return _birth_of(ticks) if ticks is not None else None


def same_process(pid: int | None, started: float | None, birth: str | None = None) -> bool:
    """Whether ``pid`` is still the process that started at ``started`` (born ``birth``, when recorded: then
    exactly, whatever the clock did since). Never init (PID 1), nor this process or any of its ancestors: no
    record, however damaged, and no environment (a shell that exported ``BACKFILL_ID``, a child's script that
    runs ``backfill cancel``) makes them a child to stop; stopping one would stop the command that asked."""
    if pid is None or pid <= 1 or pid == os.getpid() or pid in ancestors():
        return False
    if birth is not None:
        actual_birth = process_birth(pid)
        if actual_birth is not None:
            return actual_birth == birth
    if started is None:
        return False
    actual = process_started(pid)
    return actual is not None and abs(actual - started) < SAME_START


def ancestors() -> set[int]:
    """This process's parent, its parent's parent and so on, read now (a parent that died was replaced by a
    reaper): from ``/proc/<pid>/stat``, psutil only without it."""
    found: set[int] = set()
    pid = os.getppid()
    while pid > 1 and pid not in found:
        found.add(pid)
        fields = _stat_fields(pid)
        if fields is None:
            if not os.path.exists("/proc/self/stat"):
                import psutil

                with contextlib.suppress(psutil.Error):
                    found.update(parent.pid for parent in psutil.Process(pid).parents())
            break
        try:
            pid = int(fields[1])
        except (IndexError, ValueError):
            break
    return found


def process_group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def alive(pid: int) -> bool:
    """Running (or stopped), not a zombie: an exited child nobody reaped yet is dead for our purposes."""
    fields = _stat_fields(pid)
    if fields is not None:
        return bool(fields) and fields[0] != b"Z"
    import psutil  # gone, or no /proc: psutil says which

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def running_process(pid: int | None, started: float | None, birth: str | None = None) -> bool:
    """Whether ``pid`` is still the process that started at ``started`` and has not exited. A process killed and
    not yet reaped by its parent (a supervisor that kills and never waits) keeps its PID and its start time as a
    zombie, but runs nothing and holds no lock: an owner in that state is gone."""
    return same_process(pid, started, birth) and pid is not None and alive(pid)


def exited_unreaped(pid: int) -> bool | None:
    """Whether our child ``pid`` has exited, without reaping it (its zombie keeps its PID ours); None when it is
    no child of ours to wait for any more (reaped already)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return None


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


class Tracked:
    """One process, verified by PID and start time once, then reached only through what names it for good."""

    def __init__(self, pid: int, started: float | None, pidfd: int | None, birth: str | None = None) -> None:
        self.pid = pid
        self.started = started
        self.birth = birth
        self._pidfd = pidfd

    @classmethod
    def verify(cls, pid: int | None, started: float | None, birth: str | None = None) -> Tracked | None:
        """The process ``pid`` if it still is the one that started at ``started`` (born ``birth``), else None
        (gone, or reused)."""
        if pid is None or (started is None and birth is None) or pid <= 0:
            return None
        pidfd = _open_pidfd(pid)
        # Checked after the descriptor is open: whatever the descriptor names is the process that was checked.
        if not same_process(pid, started, birth):
            if pidfd is not None:
                os.close(pidfd)
            return None
        return cls(pid, started, pidfd, birth)

    def reachable(self) -> bool:
        """Not yet reaped, and the process we verified (never a process that took its PID since)."""
        if self._pidfd is not None:
            try:
                signal.pidfd_send_signal(self._pidfd, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
        return same_process(self.pid, self.started, self.birth)

    def alive(self) -> bool:
        """Running or stopped; an exited process that is not reaped yet counts as gone."""
        return self.reachable() and alive(self.pid)

    def signal(self, signum: int) -> bool:
        """Send ``signum`` to this process only; whether it was delivered."""
        try:
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signum)
            elif same_process(self.pid, self.started, self.birth):  # no pidfd: the identity is checked right before
                os.kill(self.pid, signum)
            else:
                return False
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def reap_if_adopted(self) -> None:
        """Reap this process if it ended as a child of ours that we never started: one left behind by an attempt
        is given to its reaper, which is us when we are PID 1 (a container without an init). Through the pidfd, so
        it is never a later process of the same PID (one of our own children, whose exit status is not ours to
        take); without a pidfd, nothing is reaped."""
        if self._pidfd is not None:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitid(os.P_PIDFD, self._pidfd, os.WEXITED | os.WNOHANG)

    def close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


def _anchored(group: int, anchors: Iterable[Tracked]) -> bool:
    """Whether a verified process of ours is in ``group`` now: the group's number cannot be reused while one of
    its members lives, so the group is ours."""
    # Reachable before and after the group is read: the number read belongs to the process we hold.
    return any(a.reachable() and process_group(a.pid) == group and a.reachable() for a in anchors)


def members_of_group(group: int, anchors: Iterable[Tracked]) -> list[Tracked]:
    """The processes of process group ``group`` other than the anchors, each held by its own handle, found while a
    verified anchor (its leader, a member found earlier) is in the group; none when no anchor is."""
    anchors = list(anchors)
    if not _anchored(group, anchors):
        return []
    held = {anchor.pid for anchor in anchors}  # already held: not verified again
    found: list[Tracked] = []
    for pid in _pids():  # a listing and one getpgid each: this runs at every child's exit
        if pid in held or process_group(pid) != group:
            continue
        member = Tracked.verify(pid, *process_identity(pid))
        if member is None:
            continue
        # Read again once held: the member is still in the group, and the group still ours.
        if process_group(member.pid) == group and _anchored(group, anchors):
            found.append(member)
        else:
            member.close()
    return found


def leftovers_of(pid: int, pidfd: int | None, identity: tuple[float | None, str | None] | None = None) -> TrackedFamily:
    """What our exited child ``pid`` left in its process group (``sleep 30 &``), found *before* the child is
    reaped: its zombie still holds the group's number, so every member found is ours. ``identity``: the child's
    (:func:`process_identity`) as read when it started, not read again."""
    family = TrackedFamily(left_by=pid)
    started, birth = identity if identity is not None else process_identity(pid)
    if started is None:
        return family
    leader = Tracked(pid, started, os.dup(pidfd) if pidfd is not None else None, birth)
    try:
        family.add_group(pid, members_of_group(pid, [leader]))
    finally:
        leader.close()
    return family


class TrackedFamily:
    """What must be stopped of a process tree: verified processes, their process groups and descendants. New
    members of a tracked group are picked up at every signal while a tracked process anchors the group."""

    def __init__(self, *, left_by: int | None = None) -> None:
        self._processes: dict[int, Tracked] = {}
        self._groups: set[int] = set()
        # What our exited child ``left_by`` left behind: orphans whose reaper is us when we are PID 1. Reaped as
        # they are let go, or each would stay a zombie for the rest of the run, one PID each, until none is left.
        # The child itself (its zombie is found in its group again at each signal) is its launcher's to reap:
        # its exit status is the attempt's.
        self._left_by = left_by

    @property
    def pids(self) -> list[int]:
        return sorted(self._processes)

    def add(self, process: Tracked, *, with_group: bool = True, with_descendants: bool = True) -> None:
        """Track ``process``; its group if it leads one, and its descendants as they are now."""
        if process.pid in self._processes:
            process.close()
            return
        self._processes[process.pid] = process
        if with_group and process_group(process.pid) == process.pid and process.reachable():
            self._groups.add(process.pid)
        if with_descendants:
            import psutil  # only for a child that left processes behind

            try:
                children = psutil.Process(process.pid).children(recursive=True)
            except psutil.Error:
                children = []
            for child in children:
                descendant = Tracked.verify(child.pid, *process_identity(child.pid))
                if descendant is not None:
                    self.add(descendant, with_descendants=False)

    def add_group(self, group: int, members: list[Tracked]) -> None:
        """Track ``members`` of process ``group`` (found by :func:`members_of_group`), and the group itself; and
        what each member started in a session of its own (``setsid``), which no group of ours holds."""
        for member in members:
            self.add(member, with_group=False)
        if members:
            self._groups.add(group)

    def _refresh_groups(self) -> None:
        for group in list(self._groups):
            for member in members_of_group(group, list(self._processes.values())):
                self._processes[member.pid] = member

    def signal(self, signum: int) -> None:
        self._refresh_groups()
        for process in list(self._processes.values()):
            process.signal(signum)

    def alive(self) -> bool:
        return any(process.alive() for process in self._processes.values())

    def close(self) -> None:
        for process in self._processes.values():
            if self._left_by is not None and process.pid != self._left_by:  # a live one is not reaped: WNOHANG
                process.reap_if_adopted()
            process.close()
        self._processes.clear()

    def stop(self, grace: float) -> None:
        """SIGTERM to every tracked process, SIGKILL to whatever still lives after ``grace``; then let go."""
        try:
            self.signal(signal.SIGTERM)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and self.alive():
                time.sleep(0.05)
            if self.alive():
                self.signal(signal.SIGKILL)
                if self._left_by is not None:  # dead in a moment: reaped as it is let go
                    deadline = time.monotonic() + KILLED_WAIT
                    while time.monotonic() < deadline and self.alive():
                        time.sleep(0.01)
        finally:
            self.close()


def stop_verified(identities: Iterable[tuple[int | None, float | None, str | None]], grace: float) -> list[int]:
    """Stop each process that still is the one recorded (PID, start time and birth), with its group and
    descendants; the PIDs stopped. A recorded PID now held by another process is left alone, to the last signal."""
    family = TrackedFamily()
    for pid, started, birth in identities:
        process = Tracked.verify(pid, started, birth)
        if process is not None:
            family.add(process)
    stopped = family.pids
    family.stop(grace)
    return stopped


def signal_own_group(pidfd: int | None, pid: int, signum: int, *, reaped: bool) -> None:
    """Signal the process group led by our own child ``pid``: through its pidfd (the group flag, Linux ≥ 6.9),
    else by group number only while the child is unreaped (its PID, and so the group's number, still ours)."""
    if reaped:
        return
    if pidfd is not None:
        try:
            signal.pidfd_send_signal(pidfd, signum, None, PIDFD_SIGNAL_PROCESS_GROUP)
            return
        except (ProcessLookupError, PermissionError):
            return
        except OSError as error:  # a kernel without the group flag: by number, while unreaped
            if error.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                raise
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)
