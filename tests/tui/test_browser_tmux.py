"""End to end in a real terminal: `backfill show ID`, navigate, rerun the failed partitions from the form."""

from __future__ import annotations

import shlex

import pytest

from tests.backfills import child_command, records, state_dirs
from tests.conftest import backfill_argv, run_backfill
from tests.guard_flags import GUARD
from tests.tui.tmux import Tmux


def test_show_then_rerun_failed_from_the_form(tmp_path, home):
    """`backfill show ID` opens the browser; n finds a failure; r opens the form with 'failed' preselected;
    Ctrl+S reruns them live; the state on disk then holds the new, successful attempts."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    broken = work / "BROKEN"
    broken.write_text("bug")
    template = child_command("--fail-on", "2024-01-02", "--fail-on", "2024-01-04", "--fail-while", str(broken))
    result = run_backfill(
        *GUARD,
        "--command",
        template,
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-05",
        "--on-failure",
        "continue",
        cwd=work,
        env=home,
    )
    assert result.returncode == 1
    [backfill] = state_dirs(work / "logs" / "backfills")
    broken.unlink()  # the fix is merged; the rerun will succeed
    command = shlex.join([*backfill_argv(), "show", backfill.name])
    tmux = Tmux(120, 40, command, work, {**home, "TERM": "xterm-256color"})
    try:
        tmux.wait_for("saved backfill (nothing runs it)")
        tmux.wait_for("3  2024-01-04 00:00 → 2024-01-05 00:00  ✗ failed")
        # Its own wait: a capture taken while the table repaints may hold the last row before the first (seen
        # once, with both cores busy).
        tmux.wait_for("0  2024-01-01 00:00 → 2024-01-02 00:00  ✓ succeeded")
        tmux.keys("Home", "n")
        tmux.wait_for("▸ 1  2024-01-02 00:00 → 2024-01-03 00:00  ✗ failed")
        tmux.keys("r")
        screen = tmux.wait_for("Rerun backfill")
        assert "failed (2)" in screen
        tmux.keys("C-s")
        tmux.wait_for("Backfill succeeded", timeout=60)
        tmux.keys("q")
        screen = tmux.wait_for("EXIT=0", timeout=30)
        assert f"backfill {backfill.name} succeeded" in screen
    finally:
        tmux.close()
    final = records(backfill)
    assert [r["status"] for r in final] == ["succeeded"] * 5
    assert [len(r["attempts"]) for r in final] == [1, 2, 1, 2, 1]


@pytest.mark.parametrize(("verb", "said"), [("pause", "Paused by"), ("cancel", "Cancelled by")])
def test_the_browser_of_a_paused_or_cancelled_saved_backfill_says_who_when_and_why(tmp_path, home, verb, said):
    """A backfill paused (or cancelled) from another process: `backfill show ID` says on the screen who did it, when
    and why, not only 'saved backfill (nothing runs it)'."""
    from tests.backfills import start_background, wait_for

    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    go = work / "go"
    days = ("--start-date", "2024-01-01", "--end-date", "2024-01-04")
    env = {**home, "CHILD_WAIT_FOR": str(go)}
    process = start_background(*GUARD, "--command", child_command(), *days, "--no-progress", cwd=work, env=env)
    backfill = wait_for(lambda: (state_dirs(work / "logs" / "backfills") or [None])[0])
    wait_for(lambda: any(r["status"] == "running" for r in records(backfill)))
    asked = run_backfill(verb, backfill.name, "--reason", f"warehouse {verb} for the audit", cwd=work, env=env)
    assert asked.returncode == 0, asked.stdout + asked.stderr
    go.touch()
    process.communicate(timeout=60)
    command = shlex.join([*backfill_argv(), "show", backfill.name])
    tmux = Tmux(120, 30, command, work, {**home, "TERM": "xterm-256color"})
    try:
        screen = tmux.wait_for(said)
        assert f"warehouse {verb} for the audit" in screen and "saved backfill (nothing runs it)" in screen
        assert "@" in screen.split(said, 1)[1].split(":")[0]  # who: user@host
    finally:
        tmux.close()


def test_the_audit_detail_shows_every_field_at_80_by_24(tmp_path, home):
    """A mark with a 300-character reason: in an 80×24 terminal the audit view's details (Enter) wrap it and
    scroll (Down), so every field of the line, and the reason's last words, reach the screen."""
    import orjson

    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    days = ("--start-date", "2024-01-01", "--end-date", "2024-01-03")
    assert run_backfill(*GUARD, "--command", "true", *days, "--no-progress", cwd=work, env=home).returncode == 0
    [backfill] = state_dirs(work / "logs" / "backfills")
    partition = records(backfill)[0]["id"]
    reason = "the vendor re-sent this day " * 10 + "and the end of it is here"
    marked = run_backfill("mark", backfill.name, partition[:12], "--status", "skipped", "--reason", reason,
                          cwd=work, env=home)  # fmt: skip
    assert marked.returncode == 0, marked.stderr
    [entry] = [orjson.loads(line) for line in (backfill / "audit.jsonl").read_bytes().splitlines()]
    tmux = Tmux(80, 24, shlex.join([*backfill_argv(), "show", backfill.name]), work, {**home, "TERM": "xterm-256color"})
    try:
        tmux.wait_for("saved backfill")
        tmux.keys("a")
        tmux.wait_for("Audit of backfill")
        tmux.keys("Enter")
        seen = tmux.wait_for(f"{next(iter(entry))}:")
        for _ in range(len(entry) + 12):
            tmux.keys("Down")
            seen += tmux.screen()
        flat = " ".join(seen.split())
        assert all(f"{key}:" in flat for key in entry), [key for key in entry if f"{key}:" not in flat]
        assert "and the end of it is here" in flat
    finally:
        tmux.close()


def test_every_screen_and_form_opens_and_closes_in_no_colour_mode_at_80_by_24(tmp_path, home):
    """NO_COLOR=1 at 80×24: from the list, a backfill's dashboard, then every screen and form a saved backfill
    offers — details, jump, filter, text filter, triage, export, copy menu, rerun form, help, mark form, pause
    form, parallelism form, audit view (with its details), the log's search — each opened, drawn without a
    single colour code, and closed in turn, and the mark form again after the audit view (which used to crash
    the console: a blank line with no style met the monochrome filter). Nothing fails; q leaves with exit 0."""
    from tests.tui.test_colour_tmux import colour_codes

    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    days = ("--start-date", "2024-01-01", "--end-date", "2024-01-03")
    failing = "sh -c 'echo loading {start_date}; test {start_date} != 2024-01-02'"
    result = run_backfill(*GUARD, "--command", failing, *days, "--on-failure", "continue", "--no-progress",
                          cwd=work, env=home)  # fmt: skip
    assert result.returncode == 1, result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    marked = run_backfill("mark", backfill.name, records(backfill)[0]["id"][:12], "--status", "skipped",
                          "--reason", "an audit line to look at", cwd=work, env=home)  # fmt: skip
    assert marked.returncode == 0, marked.stderr
    env = {**home, "TERM": "xterm-256color", "NO_COLOR": "1"}
    tmux = Tmux(80, 24, shlex.join([*backfill_argv(), "list"]), work, env)
    try:
        tmux.wait_for(backfill.name)
        assert colour_codes(tmux.screen(escapes=True)) == []
        tmux.keys("Enter")
        tmux.wait_for("saved backfill")
        opened = "the dashboard"
        for key, shows in [
            ("Enter", "partition 0"),
            ("/", "Jump to"),
            ("s", "Show partitions"),
            ("C-f", "Filter rows by text"),
            ("t", "Failures by kind"),
            ("e", "Export 3 rows"),
            ("Y", "Copy to the clipboard"),
            ("r", "all, successes included"),
            ("?", "Esc to close"),
            ("m", "Mark partitions"),
            ("p", "Pause backfill"),
            ("+", "Partitions at once"),
            ("a", "Audit of backfill"),
            ("m", "Mark partitions"),
        ]:  # fmt: skip (c and x, which act on what runs, are walked on a live run below)
            tmux.keys(key)
            try:
                tmux.wait_for(shows)
            except AssertionError as error:
                raise AssertionError(f"after {opened}, {key!r}: {error}") from None
            opened = key
            if key == "a":
                tmux.keys("Enter")
                tmux.wait_for("action:")
            assert colour_codes(tmux.screen(escapes=True)) == [], key
            # One Esc closes each (the audit view with its details): a second one sent at once would reach the
            # dashboard just before the next key, and a terminal reads Esc then m as Alt+m.
            tmux.keys("Escape")
            tmux.wait_gone(shows)  # closed before the next key, or that key would land in this screen
            assert "failed (" not in tmux.screen()
        tmux.keys("Home", "Down", "Enter")  # the failed partition: its log
        tmux.wait_for("partition 1  failed")
        tmux.keys("Tab", "/")
        tmux.wait_for("Search the log")
        tmux.keys("loading", "Enter")
        tmux.wait_for("/loading: line 1")
        assert colour_codes(tmux.screen(escapes=True)) == []
        tmux.escape("/loading: line 1")
        tmux.keys("q")
        tmux.wait_for("Saved backfills")
        tmux.keys("q")
        screen = tmux.wait_for("EXIT=")
        assert "EXIT=0" in screen and "dashboard failed" not in screen, screen
        assert not list(backfill.glob("*crash*"))
    finally:
        tmux.close()


def test_the_forms_of_a_live_run_open_and_close_in_no_colour_mode_at_80_by_24(tmp_path, home):
    """NO_COLOR=1 at 80×24 on a live dashboard: the cancel form (c), the stop-one-partition form (x, on the
    running row follow mode selects) and the parallelism form (+), each drawn without colour and closed with
    Esc, the run going on; then q, y stops it (exit 130)."""
    from tests.tui.test_colour_tmux import colour_codes

    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    command = shlex.join([*backfill_argv(), *GUARD, "--command", "sleep 60", "--start-date", "2024-01-01",
                          "--end-date", "2024-01-04"])  # fmt: skip
    tmux = Tmux(80, 24, command, work, {**home, "TERM": "xterm-256color", "NO_COLOR": "1"})
    try:
        tmux.wait_for("▶ running")
        for key, shows in [("c", "Cancel backfill"), ("x", "Stop partition 0 now"), ("+", "Partitions at once")]:
            tmux.keys(key)
            tmux.wait_for(shows)
            assert colour_codes(tmux.screen(escapes=True)) == [], key
            tmux.keys("Escape")
            tmux.wait_gone(shows)
            assert "▶ running" in tmux.screen()
        tmux.keys("q")
        tmux.wait_for("Stop the backfill?")
        tmux.keys("y")
        screen = tmux.wait_for("EXIT=", timeout=60)
        assert "EXIT=130" in screen, screen
    finally:
        tmux.close()


def test_a_pause_from_the_screen_and_a_resume_from_the_cli_show_on_a_saved_backfill(tmp_path, home):
    """On a saved backfill, p with a reason pauses it: the status line then says who paused it and why. A resume
    from another terminal takes that away again (the screen reads the control file when it changes)."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    days = ("--start-date", "2024-01-01", "--end-date", "2024-01-03")
    assert run_backfill(*GUARD, "--command", "true", *days, "--no-progress", cwd=work, env=home).returncode == 0
    [backfill] = state_dirs(work / "logs" / "backfills")
    tmux = Tmux(
        160, 30, shlex.join([*backfill_argv(), "show", backfill.name]), work, {**home, "TERM": "xterm-256color"}
    )
    try:
        tmux.wait_for("saved backfill (nothing runs it)")
        tmux.keys("p")
        tmux.wait_for("Pause backfill")
        tmux.keys("held for the vendor")
        tmux.wait_for("held for the vendor")  # typed into the form's reason before it is sent
        tmux.keys("Enter")
        tmux.wait_for("Paused by")
        assert "held for the vendor" in tmux.screen()
        tmux.wait_for("p Resume")  # the footer offers what p now does
        resumed = run_backfill("resume", backfill.name, "--reason", "vendor fixed", cwd=work, env=home)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        screen = tmux.wait_for("saved backfill (nothing runs it) · q leaves")
        assert "Paused by" not in screen
        assert "p Resume" not in tmux.wait_for("p Pause")
    finally:
        tmux.close()


def test_watch_is_a_live_read_only_dashboard_for_a_second_operator(tmp_path, home):
    """`backfill watch ID` while another process runs the backfill: its rows live in a real terminal, the status
    line saying read-only, no acting key in the footer, and c, p, m, r, +, - and x opening nothing; a `backfill set`
    from a third terminal reaches its header; q leaves it running.
    Without a terminal it is one line and exit 2."""
    from tests.backfills import start_background, wait_for

    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    gate = work / "go"
    days = ("--start-date", "2024-01-01", "--end-date", "2024-01-04")
    process = start_background(*GUARD, "--command", child_command("--wait-for", str(gate)), *days,
                               "--max-parallel", "2", cwd=work, env=home)  # fmt: skip
    try:
        backfill = wait_for(lambda: (state_dirs(work / "logs" / "backfills") or [None])[0])
        wait_for(lambda: sum(r["status"] == "running" for r in records(backfill)) == 2)
        piped = run_backfill("watch", backfill.name, cwd=work, env=home)
        assert piped.returncode == 2 and piped.stderr.count("\n") == 1 and "needs a terminal" in piped.stderr
        command = shlex.join([*backfill_argv(), "watch", backfill.name])
        tmux = Tmux(120, 30, command, work, {**home, "TERM": "xterm-256color"})
        try:
            tmux.wait_for("read-only: no key acts on it")
            screen = tmux.wait_for("▶ running")
            assert "running in another process" in screen
            footer = screen.rstrip().splitlines()[-1]
            assert not any(word in footer for word in ("Cancel", "Pause", "Rerun", "Mark", "Stop")), footer
            tmux.keys("c", "p", "m", "r", "+", "-", "x")
            tmux.keys("t")  # a key that only looks still works
            screen = tmux.wait_for("Failures by kind")
            assert not any(
                title in screen
                for title in (
                    "Cancel backfill",
                    "Pause backfill",
                    "Mark ",
                    "Rerun backfill",
                    "at once for",
                    "Stop part",
                )
            )
            tmux.keys("Escape")
            assert "  2 parallel" in tmux.wait_for("▶ running")
            raised = run_backfill("set", backfill.name, "--max-parallel", "3", "--reason", "r", cwd=work, env=home)
            assert raised.returncode == 0, raised.stderr
            tmux.wait_for("  3 parallel")  # another terminal's change reaches the watcher's header
            gate.write_text("")
            tmux.wait_for("saved backfill (nothing runs it)", timeout=60)
            tmux.keys("q")
            tmux.wait_for("EXIT=0", timeout=30)
        finally:
            tmux.close()
    finally:
        gate.write_text("")
        process.wait(timeout=60)
    assert process.returncode == 0 and [r["status"] for r in records(backfill)] == ["succeeded"] * 4
    assert not (backfill / "requests").exists() or not list((backfill / "requests").iterdir())


def test_triage_filter_a_kind_rerun_it_and_read_the_summary_at_160x48(tmp_path, home):
    """In a real 160×48 terminal: `backfill show ID`, t lists two kinds of failure, Enter filters the table to
    the larger, t and r open the rerun form for it with its four partitions, Ctrl+S reruns them (the cause
    fixed), and the summary printed on leaving says what ran; the smaller kind is still failed on disk."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    outage = work / "OUTAGE"
    outage.write_text("503")
    template = (
        "sh -c 'case {start_date} in "
        f'2024-01-0[2468]) if [ -f {outage} ]; then echo "load failed for {{start_date}}: HTTP 503"; exit 1; fi;; '
        '2024-01-05) echo "mid.a failed: division by zero"; exit 1;; '
        "esac'"
    )
    days = ("--start-date", "2024-01-01", "--end-date", "2024-01-10")
    result = run_backfill(*GUARD, "--command", template, *days, "--on-failure", "continue", cwd=work, env=home)
    assert result.returncode == 1, result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    outage.unlink()  # the source is back
    command = shlex.join([*backfill_argv(), "show", backfill.name])
    tmux = Tmux(160, 48, command, work, {**home, "TERM": "xterm-256color"})
    try:
        tmux.wait_for("saved backfill (nothing runs it)")
        tmux.keys("t")
        screen = tmux.wait_for("Failures by kind")
        assert "4  #1–#7  load failed for <time>: HTTP <n>" in screen and "1  #4–#4  mid.a failed" in screen
        tmux.keys("Enter")
        screen = tmux.wait_for("filter: failure: load failed for <time>: HTTP <n>")
        assert "mid.a failed: division by zero" not in screen  # only the chosen kind's rows
        tmux.keys("t")
        tmux.wait_for("Failures by kind")
        tmux.keys("r")
        screen = tmux.wait_for("Rerun backfill")
        assert "those matching the filter 'failure: load failed for <time>: HTTP <n>' (4)" in screen
        tmux.keys("C-s")
        tmux.wait_for("Backfill failed", timeout=60)  # the other kind still fails the whole backfill
        tmux.keys("q")
        screen = tmux.wait_for("EXIT=", timeout=30)
        assert f"backfill {backfill.name}" in screen and "kinds       1 kind of failure: mid.a failed" in screen
    finally:
        tmux.close()
    assert [r["status"] for r in records(backfill)] == ["succeeded"] * 4 + ["failed"] + ["succeeded"] * 5
    assert [len(r["attempts"]) for r in records(backfill)] == [1, 2, 1, 2, 1, 2, 1, 2, 1, 1]


def test_v_hands_the_terminal_to_the_pager_and_the_dashboard_comes_back(tmp_path, home):
    """In a real terminal: `backfill show ID`, Enter, Tab, v — $PAGER gets the whole log on the terminal (the
    dashboard is gone from it), and once it exits the dashboard is drawn again, keys working."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    template = "sh -c 'for i in 1 2 3; do echo line-$i-of-{start_date}; done'"
    days = ("--start-date", "2024-01-01", "--end-date", "2024-01-02")
    result = run_backfill(*GUARD, "--command", template, *days, cwd=work, env=home)
    assert result.returncode == 0, result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    pager = "sh -c 'echo PAGER-START; cat \"$0\"; echo PAGER-END; read answer'"
    command = shlex.join([*backfill_argv(), "show", backfill.name])
    tmux = Tmux(100, 30, command, work, {**home, "TERM": "xterm-256color", "PAGER": pager})
    try:
        tmux.wait_for("2024-01-02")
        tmux.keys("Enter")
        tmux.wait_for("line-3-of-2024-01-01")
        tmux.keys("Tab", "v")
        screen = tmux.wait_for("PAGER-END")
        assert "PAGER-START\nline-1-of-2024-01-01\nline-2-of-2024-01-01\nline-3-of-2024-01-01\nPAGER-END" in screen
        assert "backfill " + backfill.name not in screen  # the pager has the terminal to itself
        tmux.keys("Enter")
        screen = tmux.wait_for("backfill " + backfill.name)
        assert "PAGER-START" not in screen and "log following the end" in screen
        tmux.keys("q")
        tmux.wait_for("EXIT=0", timeout=30)
    finally:
        tmux.close()


def test_a_closed_terminal_stops_a_rerun_started_from_the_browser(tmp_path, home):
    """A rerun started from `backfill show ID` runs its children when the terminal closes (SIGHUP): the rerun is
    stopped as a backfill's own run is — its children stopped and waited for, no record left `running` — and the
    process ends by itself. SIGHUP's default action killed the process at once, its children left running."""
    import psutil

    from tests.tui.test_dashboard_tmux import writing_its_pid

    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    broken = work / "BROKEN"
    broken.write_text("bug")
    template = child_command("--fail-on", "2024-01-02", "--fail-on", "2024-01-03", "--fail-while", str(broken))
    days = ("--start-date", "2024-01-01", "--end-date", "2024-01-03", "--on-failure", "continue")
    assert run_backfill(*GUARD, "--command", template, *days, cwd=work, env=home).returncode == 1
    [backfill] = state_dirs(work / "logs" / "backfills")
    broken.unlink()
    pidfile = tmp_path / "pid"
    command = writing_its_pid([*backfill_argv(), "show", backfill.name], pidfile)
    never = tmp_path / "never"  # the rerun's children wait for it: they run until stopped
    tmux = Tmux(120, 40, command, work, {**home, "TERM": "xterm-256color", "CHILD_WAIT_FOR": str(never)})
    try:
        tmux.wait_for("saved backfill (nothing runs it)")
        tmux.keys("r")
        tmux.wait_for("Rerun backfill")
        tmux.keys("C-s")
        tmux.wait_for("▶ running")
        process = psutil.Process(int(pidfile.read_text()))
        children = process.children(recursive=True)
        assert children
        tmux.kill_server()
        _gone, alive_still = psutil.wait_procs([process, *children], timeout=60)
        assert not alive_still, f"still alive after the terminal closed: {alive_still}"
    finally:
        tmux.close()
    assert "running" not in [r["status"] for r in records(backfill)]
