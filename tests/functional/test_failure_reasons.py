"""Why a partition failed, everywhere: the record, the progress line, show (text and JSON)."""

from __future__ import annotations

import json
import shlex
import sys

from tests.backfills import records, state_dirs
from tests.conftest import run_backfill
from tests.guard_flags import GUARD, REASON

SQL_ERROR = 'staging.order_lines failed: Parser Error: syntax error at or near "SELEC"'


def test_a_pipeline_failure_names_the_asset_and_its_error_in_every_front_end(shop, home):
    """A broken SQL asset: the attempt's error, the progress line, show text and show JSON all carry
    'staging.order_lines failed: Parser Error: …' instead of 'exited with code 1'."""
    sql = shop / "pipeline" / "assets" / "staging" / "order_lines.sql"
    sql.write_text(sql.read_text().replace("\nSELECT", "\nSELEC", 1))
    result = run_backfill(
        *REASON, "pipeline", "--start-date", "2024-01-01", "--end-date", "2024-01-02", cwd=shop, env=home
    )
    assert result.returncode == 1, result.stderr
    [backfill] = state_dirs(shop / "logs" / "backfills")
    [failed] = [r for r in records(backfill) if r["status"] == "failed"]
    assert failed["attempts"][-1]["error"] == SQL_ERROR
    assert failed["attempts"][-1]["exit_code"] == 1
    assert SQL_ERROR in result.stderr  # the progress line of the failure (no terminal here)
    text = run_backfill("show", backfill.name, "--output", "text", cwd=shop, env=home)
    assert SQL_ERROR in text.stdout
    document = json.loads(run_backfill("show", backfill.name, "--output", "json", cwd=shop, env=home).stdout)
    [row] = [p for p in document["partitions"] if p["status"] == "failed"]
    assert row["reason"] == SQL_ERROR and row["attempts"][-1]["error"] == SQL_ERROR


def test_a_command_failure_is_its_last_line_and_a_killed_child_names_the_signal(work, home):
    """A command child's reason is the last non-empty line it printed (colour codes removed, bounded);
    a child killed by a signal says which, followed by its last words."""
    script = (
        "import os, sys, signal, time\n"
        "day = sys.argv[1][:10]\n"
        "print('loading', day, flush=True)\n"
        "if day == '2024-01-01':\n"
        "    print('\\x1b[31mfatal: bucket s3://raw not found\\x1b[0m', file=sys.stderr, flush=True)\n"
        "    print('', flush=True)\n"
        "    sys.exit(2)\n"
        "if day == '2024-01-02':\n"
        "    print('x' * 5000, flush=True)\n"
        "    sys.exit(2)\n"
        "print('about to be killed', flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    command = shlex.join([sys.executable, "-c", script, "{start}"])
    result = run_backfill(
        *GUARD,
        "--command",
        command,
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-03",
        "--on-failure",
        "continue",
        cwd=work,
        env=home,
    )
    assert result.returncode == 1
    [backfill] = state_dirs(work / "logs" / "backfills")
    errors = {r["index"]: r["attempts"][-1]["error"] for r in records(backfill)}
    assert errors[0] == "fatal: bucket s3://raw not found"
    assert len(errors[1]) == 300 and errors[1].endswith("…")
    assert errors[2] == "killed by SIGKILL: about to be killed"
    for error in errors.values():
        assert error[:60] in result.stderr


def test_a_reason_reaches_no_terminal_with_the_child_s_escape_sequences(work, home):
    """A child's last line that sets the window title (OSC), links (OSC 8), moves the cursor through an 8-bit CSI or
    sends a DCS string: only its colours were removed, so the record, the progress line and `show` carried the
    rest raw to every terminal that read them (another operator's too, from the shared state directory). The
    reason is now its printable text in all of them, and the JSON's."""
    line = ("\x1b[1;31mfatal:\x1b[0m \x1b]0;PWNED\x07bucket \x1b]8;;https://x.io\x1b\\raw\x1b]8;;\x1b\\ "
            "\x9b2J\x1bPq#0\x1b\\missing\x7f")  # fmt: skip
    command = shlex.join([sys.executable, "-c", f"import sys; print({line!r}); sys.exit(2)"])
    result = run_backfill(*GUARD, "--command", command, "--start-date", "2024-01-01", "--end-date", "2024-01-01",
                          cwd=work, env=home)  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    [record] = records(backfill)
    assert record["attempts"][-1]["error"] == "fatal: bucket raw missing"
    text = run_backfill("show", backfill.name, cwd=work, env=home)
    document = json.loads(run_backfill("show", backfill.name, "--output", "json", cwd=work, env=home).stdout)
    assert document["partitions"][0]["reason"] == "fatal: bucket raw missing"
    for shown in (result.stdout + result.stderr, text.stdout):
        assert "fatal: bucket raw missing" in shown
        assert not any(c in shown for c in "\x1b\x07\x9b\x7f"), repr(shown)
