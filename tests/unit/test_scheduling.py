"""The executor's scheduling, in-process over real children: bounds, order, retries, failure policies, stops."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from engine.base.boot_clock import boot_id
from engine.base.processes import process_started
from engine.base.settings import Settings
from engine.execute.backfill import Prepared, create_backfill, state_root_for
from engine.execute.executor import Outcome
from engine.pipeline.options import RunOptions
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.planning import plan_request
from tests.backfills import child_command, child_running, max_overlap, read_spans, records


def prepare(
    work: Path, command: str | None, days: int, *, target: str | None = None, cwd: Path | None = None, **options
) -> Prepared:
    """A backfill of ``command`` (or of the pipeline ``target``, relative to ``work``) over ``days`` days, started
    in ``cwd`` (``work``)."""
    planned = plan_request(
        target=target,
        command=command,
        name=None,
        start="2024-01-01",
        end=f"2024-01-{days:02d}",
        timezone="UTC",
        partition="daily",
        environment=None,
        config_file=None,
        run_options=RunOptions(),
        options=ExecutionOptions(**options),
        force=False,
        cwd=cwd or work,
    )
    root = state_root_for(planned.spec, str(work / "states"), work)
    return create_backfill(planned, root=root, cwd=cwd or work, settings=Settings())


LAUNCHED: list[int] = []


def run(work: Path, days: int, *child_args: str, grace: float = 5.0, **options) -> tuple[Outcome, Prepared]:
    """Run to the end; ``LAUNCHED`` is left holding the partition indices in the order they were launched."""
    command = child_command("--spans", str(work / "spans.jsonl"), *child_args)
    prepared = prepare(work, command, days, **options)
    executor = prepared.executor(grace=grace)
    outcome = executor.run()
    LAUNCHED[:] = [event.index for event in executor.snapshot().events if event.kind == "started"]
    return outcome, prepared


@pytest.fixture
def work(tmp_path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


def test_never_more_children_than_the_bound_and_oldest_first(work, monkeypatch):
    """Six 0.4 s children at most two at a time: exactly two overlap, launched in index order, all succeed."""
    monkeypatch.setenv("CHILD_SLEEP", "0.4")
    outcome, prepared = run(work, 6, max_parallel=2)
    spans = read_spans(work / "spans.jsonl")
    assert max_overlap([(s["began"], s["ended"]) for s in spans]) == 2
    assert LAUNCHED == [0, 1, 2, 3, 4, 5]
    assert (outcome.status, outcome.selected, outcome.failed_in_run) == ("succeeded", 6, [])
    assert outcome.counts["succeeded"] == 6
    assert [r["status"] for r in records(prepared.store.directory)] == ["succeeded"] * 6


def test_reverse_runs_the_newest_first(work):
    """--reverse launches from the last partition down."""
    run(work, 4, max_parallel=1, reverse=True)
    assert LAUNCHED == [3, 2, 1, 0]


def test_a_retry_runs_right_after_the_failure_and_only_as_often_as_allowed(work):
    """Every first attempt fails: with 2 retries each partition takes exactly 2 attempts (a1 failed, a2
    succeeded), and the retry runs before the next partition starts."""
    outcome, prepared = run(work, 3, "--fail-first-attempt", str(work), max_parallel=1, retries=2)
    assert outcome.status == "succeeded"
    for record in records(prepared.store.directory):
        assert [(a["run_id"].rsplit("-", 2)[1:], a["status"]) for a in record["attempts"]] == [
            ([f"p{record['index']}", "a1"], "failed"),
            ([f"p{record['index']}", "a2"], "succeeded"),
        ]
    assert LAUNCHED == [0, 0, 1, 1, 2, 2]


def test_without_retries_a_failure_stops_new_launches(work):
    """on-failure stop: the failed partition ends the run; later partitions stay queued, never started."""
    outcome, prepared = run(work, 5, "--fail-on", "2024-01-02", max_parallel=1, on_failure="stop")
    assert (outcome.status, outcome.failed_in_run) == ("failed", [1])
    assert [r["status"] for r in records(prepared.store.directory)] == ["succeeded", "failed"]
    assert prepared.board.counts()["queued"] == 3
    assert LAUNCHED == [0, 1]


def test_on_failure_continue_runs_everything_else(work):
    """on-failure continue: the other partitions all run; the run is failed, naming every failed partition."""
    outcome, prepared = run(
        work, 5, "--fail-on", "2024-01-02", "--fail-on", "2024-01-04", max_parallel=2, on_failure="continue"
    )
    assert (outcome.status, sorted(outcome.failed_in_run)) == ("failed", [1, 3])
    statuses = [r["status"] for r in records(prepared.store.directory)]
    assert statuses == ["succeeded", "failed", "succeeded", "failed", "succeeded"]


def test_fail_fast_cancels_the_children_still_running(work, monkeypatch):
    """fail-fast: when the 0.2 s partition fails, its 30 s sibling is cancelled at once, with the reason."""
    monkeypatch.setenv("CHILD_SLEEP", "0")
    command = child_command("--fail-on", "2024-01-02", "--sleep", "0.2")
    slow = child_command("--sleep", "30")
    template = f"sh -c 'case {{start}} in 2024-01-01*) exec {slow} ;; *) exec {command} ;; esac'"
    prepared = prepare(work, template, 2, max_parallel=2, on_failure="fail-fast")
    started = time.monotonic()
    outcome = prepared.executor(grace=5).run()
    assert time.monotonic() - started < 20
    assert outcome.status == "failed"
    first, second = records(prepared.store.directory)
    assert (first["status"], first["attempts"][-1]["error"]) == (
        "cancelled",
        "cancelled: fail-fast after partition 1 failed",
    )
    assert second["status"] == "failed"


def test_a_child_past_its_timeout_fails_with_the_timeout_named(work):
    """--timeout 300ms stops a 30 s child: failed, "timed out after 300ms", well before 30 s."""
    started = time.monotonic()
    outcome, prepared = run(work, 1, "--sleep", "30", timeout=300_000)
    assert time.monotonic() - started < 20
    [record] = records(prepared.store.directory)
    assert (outcome.status, record["status"], record["attempts"][-1]["error"]) == (
        "failed",
        "failed",
        "timed out after 300ms",
    )


def test_a_requested_stop_cancels_what_runs_and_launches_nothing_more(work):
    """request_stop while two 30 s children run: both cancelled with the reason, the rest never started."""
    prepared = prepare(work, child_command("--sleep", "30"), 5, max_parallel=2)
    executor = prepared.executor(grace=5)
    result: dict[str, Outcome] = {}
    thread = threading.Thread(target=lambda: result.setdefault("outcome", executor.run()))
    thread.start()
    deadline = time.monotonic() + 20
    while len(executor.snapshot().running) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    executor.request_stop("operator said so")
    thread.join(30)
    assert result["outcome"].status == "cancelled"
    stopped = records(prepared.store.directory)
    assert [(r["index"], r["status"], r["attempts"][-1]["error"]) for r in stopped] == [
        (0, "cancelled", "cancelled: operator said so"),
        (1, "cancelled", "cancelled: operator said so"),
    ]


def test_a_running_record_says_what_runs_where_before_the_child_ends(work):
    """While a child runs, its record holds the interval, the attempt with its PID and process start time (so
    a reused PID is never signalled), its log, the executor's generation and the launcher."""
    import psutil

    prepared = prepare(work, child_command("--sleep", "30"), 1)
    executor = prepared.executor(grace=5)
    thread = threading.Thread(target=executor.run)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        found: list[dict] = []
        while not found and time.monotonic() < deadline:
            found = [r for r in records(prepared.store.directory) if child_running(r)]
            time.sleep(0.02)
        [record] = found
        [attempt] = record["attempts"]
        interval = prepared.spec.plan.interval(0)
        assert (record["start"], record["end"]) == ("2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z")
        assert (record["start_us"], record["end_us"]) == (interval.start, interval.end)
        run_id = f"{prepared.store.id}-p0-a1"
        assert (attempt["run_id"], attempt["status"], attempt["log"]) == (run_id, "running", f"children/{run_id}.log")
        assert attempt["started_at"] and attempt["finished_at"] is None and attempt["launcher"] == "exec"
        assert attempt["generation"] == prepared.takeover.generation.number == 1
        child = psutil.Process(attempt["pid"])
        # The start time follows the kernel's boot time, which moves as the wall clock steps (seen in CI: psutil
        # read it 2 s later than the executor did), so it is compared with this process's own reading and only
        # roughly with psutil's; the birth names the child exactly.
        assert attempt["pid_started"] == process_started(child.pid) and child.is_running()
        assert abs(attempt["pid_started"] - child.create_time()) < 60
        ticks = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        assert attempt["pid_birth"] == f"{boot_id()}:{ticks}"
        assert executor.snapshot().running[0].pid == attempt["pid"]
    finally:
        executor.request_stop("test over")
        thread.join(30)


def test_a_program_gone_before_its_launch_fails_the_partition_with_the_reason(work):
    """The program existed when the backfill was planned and is gone when its partition starts: the attempt
    fails with "cannot start", the retry is still made, and the log says why."""
    program = work / "job.sh"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    prepared = prepare(work, f"{program} {{start}}", 2, retries=1, on_failure="continue")
    program.unlink()
    outcome = prepared.executor(grace=5).run()
    assert (outcome.status, sorted(outcome.failed_in_run)) == ("failed", [0, 1])
    for record in records(prepared.store.directory):
        assert [(a["status"], a["error"]) for a in record["attempts"]] == [
            ("failed", f"cannot start '{program}': No such file or directory")
        ] * 2
        assert record["status"] == "failed"
    log = prepared.store.log_path(f"{prepared.store.id}-p0-a1").read_text()
    assert log == f"backfill: cannot start '{program}': No such file or directory\n"


def test_a_working_directory_gone_before_a_launch_is_named_not_the_program(work):
    """The directory the backfill was started in is removed before its partition starts: the attempt and its log
    name the directory that cannot be entered, not the program (``sh``, which exists)."""
    started_in = work / "job"
    started_in.mkdir()
    prepared = prepare(work, "sh -c true", 1, cwd=started_in)
    started_in.rmdir()
    outcome = prepared.executor(grace=5).run()
    assert outcome.status == "failed"
    reason = f"cannot enter its working directory '{started_in}': No such file or directory"
    [record] = records(prepared.store.directory)
    assert [a["error"] for a in record["attempts"]] == [reason]
    assert prepared.store.log_path(f"{prepared.store.id}-p0-a1").read_text() == f"backfill: {reason}\n"


def test_a_resume_appends_attempts_and_never_reuses_a_run_id_whose_log_exists(work):
    """A second executor over the same store reruns the failed partition as attempt 2 (attempt 1 kept); a log
    already named like attempt 2 (a start record lost to a crash) pushes the new attempt to 3."""
    from engine.execute.backfill import load_backfill, prepare_resume, replan
    from engine.execute.rerun import PartitionSelection

    marker = work / "fail"
    marker.touch()
    outcome, prepared = run(work, 3, "--fail-on", "2024-01-02", "--fail-while", str(marker), on_failure="continue")
    assert outcome.failed_in_run == [1]
    marker.unlink()
    store = prepared.store
    store.log_path(f"{store.id}-p1-a2").write_text("an earlier attempt's log\n")
    loaded = load_backfill(store.id, str(work / "states"), work)
    planned = replan(loaded.spec, prepared.options)
    resumed = prepare_resume(loaded, planned, PartitionSelection("failed"), settings=Settings())
    executor = resumed.executor(grace=5)
    assert executor.run().status == "succeeded"
    second = records(store.directory)[1]
    assert [(a["run_id"][-2:], a["status"], a["generation"]) for a in second["attempts"]] == [
        ("a1", "failed", 1),
        ("a3", "succeeded", 2),
    ]
    assert store.log_path(f"{store.id}-p1-a2").read_text() == "an earlier attempt's log\n"
    assert [r["status"] for r in records(store.directory)] == ["succeeded"] * 3
    started = [e.run_id for e in executor.snapshot().events if e.kind == "started"]
    assert started == [f"{store.id}-p1-a3"]
