"""The executor runs a partition's verification as a second child of its attempt (``ExecutorHooks.verify_child``):
in-process, with real children, so that a mutant of the executor's reaping is attributed to these tests."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from engine.execute.active_child import VerifyingChild
from engine.execute.executor import ExecutorHooks, Outcome
from engine.execute.launcher import ChildSpec
from engine.guardrails.verification import FAILED, VERIFIED, WARNING, Verification
from tests.backfills import records
from tests.unit.test_scheduling import prepare

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def work(tmp_path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


def judge(code: int) -> Verification:
    return Verification(VERIFIED, "exit 0") if code == 0 else Verification(FAILED, f"exit {code}")


def verifier(work: Path, script: str, seen: list | None = None):
    """A verify_child hook running ``python -c script PARTITION_ID INDEX`` in ``work``."""

    def verify_child(index, interval, attempt, partition_id) -> VerifyingChild:
        if seen is not None:
            seen.append((index, attempt.run_id, partition_id))
        log = work / "states" / f"verify-{attempt.run_id}.log"
        argv = [sys.executable, "-c", script, partition_id, str(index)]
        spec = ChildSpec(argv, str(work), {"PATH": "/usr/bin:/bin"}, log)
        return VerifyingChild(spec, judge, lambda error: Verification(WARNING, f"cannot start: {error.strerror}"))

    return verify_child


def run_with(work: Path, command: str, days: int, hooks: ExecutorHooks, **options) -> tuple[Outcome, list[dict]]:
    prepared = prepare(work, command, days, **options)
    outcome = prepared.executor(hooks=hooks, grace=5).run()
    return outcome, records(prepared.store.directory)


def test_a_verification_that_exits_0_leaves_the_partition_succeeded_with_its_commands_exit_code(work):
    """Each partition whose command exited 0 is verified once, with its own index, run and ID; the attempt keeps
    the command's exit code and carries the verification."""
    seen: list = []
    hooks = ExecutorHooks(verify_child=verifier(work, "import sys; sys.exit(0)", seen))
    outcome, done = run_with(work, "true", 3, hooks)
    assert outcome.status == "succeeded"
    assert [r["status"] for r in done] == ["succeeded"] * 3
    assert [r["attempts"][-1]["verification"]["status"] for r in done] == [VERIFIED] * 3
    assert [r["attempts"][-1]["exit_code"] for r in done] == [0, 0, 0]
    assert sorted(seen) == sorted((r["index"], r["attempts"][-1]["run_id"], r["id"]) for r in done)


def test_a_verification_that_fails_fails_its_partition_and_starts_nothing_more(work):
    """Exit 3 on the second partition (parallel 1): it fails "verification: exit 3", its attempt keeps exit code 0,
    and the third never starts."""
    script = "import sys; sys.exit(3 if sys.argv[2] == '1' else 0)"
    hooks = ExecutorHooks(verify_child=verifier(work, script))
    outcome, done = run_with(work, "true", 3, hooks, max_parallel=1)
    assert outcome.status == "failed"
    assert [(r["status"], r["attempts"][-1].get("error")) for r in done] == [
        ("succeeded", None),
        ("failed", "verification: exit 3"),
    ]
    assert done[1]["attempts"][-1]["exit_code"] == 0


def test_a_failed_command_is_not_verified(work):
    """A command that exits 1 fails as it is: no verification runs."""
    seen: list = []
    hooks = ExecutorHooks(verify_child=verifier(work, "import sys; sys.exit(0)", seen))
    outcome, done = run_with(work, "false", 1, hooks)
    assert outcome.status == "failed" and seen == []
    assert done[0]["attempts"][-1]["exit_code"] == 1 and done[0]["attempts"][-1].get("verification") is None


def test_a_verification_that_cannot_start_is_judged_as_such(work):
    """A program that is not there: the hook's judgement of the start error is recorded (a warning here, so the
    partition succeeds)."""

    def missing(index, interval, attempt, partition_id) -> VerifyingChild:
        spec = ChildSpec([str(work / "nowhere")], str(work), {}, work / "states" / "v.log")
        return VerifyingChild(spec, judge, lambda error: Verification(WARNING, f"cannot start: {error.strerror}"))

    _, done = run_with(work, "true", 1, ExecutorHooks(verify_child=missing))
    assert done[0]["status"] == "succeeded"
    assert done[0]["attempts"][-1]["verification"]["detail"] == "cannot start: No such file or directory"


def test_a_stop_reaches_a_running_verification_and_the_partition_is_cancelled(work):
    """request_stop while the verification sleeps: it is stopped and waited for, the partition cancelled."""
    started = work / "verifying"
    script = f"import pathlib, time; pathlib.Path({str(started)!r}).write_text('x'); time.sleep(600)"
    prepared = prepare(work, "true", 1)
    executor = prepared.executor(hooks=ExecutorHooks(verify_child=verifier(work, script)), grace=5)
    result: dict[str, Outcome] = {}
    thread = threading.Thread(target=lambda: result.setdefault("outcome", executor.run()))
    thread.start()
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    executor.request_stop("operator said so")
    thread.join(60)
    assert result["outcome"].status == "cancelled"
    [record] = records(prepared.store.directory)
    assert (record["status"], record["attempts"][-1]["error"]) == ("cancelled", "cancelled: operator said so")


def test_other_partitions_start_while_one_is_verified(work):
    """Parallel 2, three days: the first day's verification waits until the third day's command has run, which
    starts only once the second has been reaped."""
    marker = work / "third-ran"
    command = f"sh -c 'test {{start_date}} = 2024-01-03 && touch {marker}; exit 0'"
    script = (
        f"import pathlib, sys, time\nif sys.argv[2] == '0':\n"
        f"    while not pathlib.Path({str(marker)!r}).exists(): time.sleep(0.02)\n"
    )
    outcome, done = run_with(work, command, 3, ExecutorHooks(verify_child=verifier(work, script)), max_parallel=2)
    assert outcome.status == "succeeded"
    assert [r["attempts"][-1]["verification"]["status"] for r in done] == [VERIFIED] * 3
