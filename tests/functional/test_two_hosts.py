"""Two hosts sharing one state directory, simulated on one kernel: each host is a UTS + PID + mount namespace
with its own hostname and its own boot ID (bind-mounted over ``/proc/sys/kernel/random/boot_id``), so neither
can see or signal the other's processes and each judges the other's lease by the wall clock, as real hosts do.
Each host reconciles and resumes the other's backfill: never two live children of one partition (every child
holds a lock on its partition for its whole life, and records any overlap)."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from pathlib import Path

import psutil
import pytest

from tests.backfills import child_command, state_dirs, wait_for
from tests.conftest import backfill_argv
from tests.guard_flags import GUARD

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and bind mounts need root (CI runs as root)")

# A lease of 2 s renewed every 0.4 s; another host waits 1 s past its expiry; a stopped child gets 1 s.
FAST = {
    "BACKFILL_LEASE_SECONDS": "2",
    "BACKFILL_LEASE_RENEW_SECONDS": "0.4",
    "BACKFILL_OTHER_HOST_GRACE": "1",
    "BACKFILL_STOP_GRACE": "1",
}


class Host:
    """A namespace standing in for a machine: ``run`` and ``start`` execute ``backfill`` on it, ``crash`` kills
    everything on it at once (its init dies)."""

    def __init__(self, name: str, scratch: Path, work: Path, env: dict[str, str]) -> None:
        self.name, self.work, self.env = name, work, env
        boot = scratch / f"boot-{name}-{uuid.uuid4().hex[:6]}"
        boot.write_text(f"{uuid.uuid4()}\n")
        ready = scratch / f"ready-{boot.name}"
        script = (
            f"hostname {name} && mount --bind {boot} /proc/sys/kernel/random/boot_id && touch {ready} "
            "&& exec sleep 100000"
        )
        self.keeper = subprocess.Popen(["unshare", "--uts", "--pid", "--fork", "--mount-proc", "sh", "-c", script])
        wait_for(ready.exists)
        self.init = wait_for(lambda: next(iter(psutil.Process(self.keeper.pid).children()), None)).pid

    def argv(self, *args: str) -> list[str]:
        return ["nsenter", "-t", str(self.init), "--uts", "--pid", "--mount", f"--wd={self.work}", *backfill_argv(),
                *args]  # fmt: skip

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(*args), env=self.env, capture_output=True, text=True, timeout=60)

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args), env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def kill_executor(self, started: subprocess.Popen[str]) -> None:
        """SIGKILL the executor alone (nsenter's child): its children live on, orphans on this host."""
        [executor] = psutil.Process(started.pid).children()
        executor.send_signal(signal.SIGKILL)
        started.wait(timeout=30)

    def crash(self) -> None:
        os.kill(self.init, signal.SIGKILL)  # the namespace's init: the kernel kills every process in it
        self.keeper.wait(timeout=30)


def began(ledger: Path) -> int:
    return len(ledger.read_text().splitlines()) if ledger.exists() else 0


def reconciled(host: Host, backfill: str) -> bool:
    done = host.run("reconcile", backfill, "--reason", "host gone")
    return done.returncode == 0 and "lost" in done.stdout


def test_each_host_reconciles_and_resumes_the_other_and_no_partition_ever_runs_twice(tmp_path):
    """Host A runs 4 partitions, 2 at a time; B is refused while A's lease runs; A's executor dies with its
    children alive: B reconciles (it cannot reach them) and is refused again, their lock still held; A crashes:
    B resumes; A, rebooted, is refused while B's lease runs; B's executor dies: A reconciles, is refused until
    B's orphans end, then resumes and finishes. No partition ever had two children at once."""
    work, locks, ledger, go = tmp_path / "work", tmp_path / "locks", tmp_path / "began", tmp_path / "go"
    (work / ".git").mkdir(parents=True)
    locks.mkdir()
    env = {**os.environ, "NO_COLOR": "1", **FAST}
    env.pop("BRUIN_VARS", None)
    hosts = [Host("hosta", tmp_path, work, env), Host("hostb", tmp_path, work, env)]
    a, b = hosts
    try:
        template = child_command("--exclusive-dir", str(locks), "--began", str(ledger), "--wait-for", str(go))
        first = a.start(*GUARD, "--command", template, "--start-date", "2024-01-01", "--end-date", "2024-01-04",
                        "--max-parallel", "2", "--on-failure", "continue", "--no-progress")  # fmt: skip
        wait_for(lambda: began(ledger) == 2)
        [backfill] = [p.name for p in state_dirs(work / "logs" / "backfills")]

        refused = b.run("--continue", backfill, "--no-progress")
        assert refused.returncode == 3 and "on hosta" in refused.stderr, refused.stderr

        a.kill_executor(first)
        orphans = [p for p in psutil.Process(a.init).children() if "child.py" in " ".join(p.cmdline())]
        assert len(orphans) == 2
        wait_for(lambda: reconciled(b, backfill), timeout=60)
        assert all(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in orphans), "B signalled A's child"
        held = b.run("--continue", backfill, "--no-progress")
        assert held.returncode == 3 and "children of a previous executor" in held.stderr, held.stderr
        assert began(ledger) == 2

        a.crash()
        second = b.start("--continue", backfill, "--no-progress")
        wait_for(lambda: began(ledger) == 4)
        a = hosts[0] = Host("hosta", tmp_path, work, env)  # rebooted: a new boot ID, nothing of before
        refused = a.run("--continue", backfill, "--no-progress")
        assert refused.returncode == 3 and "on hostb" in refused.stderr, refused.stderr

        b.kill_executor(second)
        wait_for(lambda: reconciled(a, backfill), timeout=60)
        held = a.run("--continue", backfill, "--no-progress")
        assert held.returncode == 3 and "children of a previous executor" in held.stderr, held.stderr
        go.write_text("go")  # B's orphans finish (their outcome unrecorded: their executor is gone)
        last = a.run("--continue", backfill, "--no-progress")
        assert last.returncode == 0, last.stdout + last.stderr
        assert not (locks / "OVERLAP").exists(), (locks / "OVERLAP").read_text()
        shown = a.run("show", backfill, "--output", "json")
        import json

        partitions = json.loads(shown.stdout)["partitions"]
        assert [p["status"] for p in partitions] == ["succeeded"] * 4
        lost = [a["status"] for p in partitions for a in p["attempts"]].count("lost")
        assert lost == 4, "every attempt of an executor that died was settled lost, by the other host"
    finally:
        for host in hosts:
            if host.keeper.poll() is None:
                host.crash()
