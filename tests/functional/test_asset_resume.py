"""Asset-level resume inside a pipeline partition (issue 23 item 11), with real processes: a partition that
failed at one asset runs that asset and its downstream again on --continue, not the assets that succeeded."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from tests.backfills import state_dirs
from tests.builder import Repo
from tests.conftest import run_backfill

# Each asset appends "<name> <day>" to RUNS_LOG when it runs: the log says exactly which assets ran, and when.
# "c" fails while FAIL_FLAG exists.
BODY = """import os
with open(os.environ["RUNS_LOG"], "a") as log:
    log.write("{name} " + os.environ["BRUIN_START_DATE"] + "\\n")
{extra}"""
FAILS = """if os.path.exists(os.environ["FAIL_FLAG"]):
    raise SystemExit("c: the source is not there yet")
"""
DAYS = ("--start-date", "2024-01-01", "--end-date", "2024-01-02", "--on-failure", "continue")


@pytest.fixture
def chain(tmp_path: Path, home: dict[str, str]) -> tuple[Repo, dict[str, str]]:
    """Pipeline p: a → b and c → d (c fails while the flag file exists), each logging its runs."""
    repo = Repo(tmp_path / "repo")
    for name, depends in (("a", []), ("b", ["a"]), ("c", []), ("d", ["c"])):
        repo.python(name, BODY.format(name=name, extra=FAILS if name == "c" else ""), depends=depends)
    env = {**home, "RUNS_LOG": str(tmp_path / "runs.log"), "FAIL_FLAG": str(tmp_path / "fail")}
    return repo, env


def ran(env: dict[str, str]) -> list[str]:
    """The assets that ran since the last call, sorted, and the log emptied."""
    path = Path(env["RUNS_LOG"])
    lines = sorted(path.read_text().splitlines()) if path.exists() else []
    path.write_text("")
    return lines


def failed_backfill(repo: Repo, env: dict[str, str]) -> Path:
    """Two days run with c failing: a, b and c ran, d did not (upstream failed); exit 1."""
    Path(env["FAIL_FLAG"]).write_text("")
    first = run_backfill("p", *DAYS, "--reason", "first", "--no-progress", cwd=repo.root, env=env)
    assert first.returncode == 1, first.stdout + first.stderr
    assert ran(env) == ["a 2024-01-01", "a 2024-01-02", "b 2024-01-01", "b 2024-01-02", "c 2024-01-01", "c 2024-01-02"]
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    return backfill


def attempts(backfill: Path) -> list[list[dict]]:
    records = sorted(
        (orjson.loads(p.read_bytes()) for p in (backfill / "partitions").glob("*.json")), key=lambda r: r["index"]
    )
    return [r["attempts"] for r in records]


def test_continue_reruns_the_failed_asset_and_its_downstream_only(chain):
    """After c failed, --continue runs c and d in each partition and carries a and b from the failed attempt:
    the attempt and `show --output json` name what ran and where the rest came from, the run record lists
    c and d alone, verification judges the carried assets by the earlier run record."""
    repo, env = chain
    backfill = failed_backfill(repo, env)
    Path(env["FAIL_FLAG"]).unlink()
    again = run_backfill("--continue", backfill.name, "--no-progress", cwd=repo.root, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert ran(env) == ["c 2024-01-01", "c 2024-01-02", "d 2024-01-01", "d 2024-01-02"]
    runs = repo.root / "logs" / "runs"
    for first, second in attempts(backfill):
        assert first["status"] == "failed" and "assets" not in first
        assert second["status"] == "succeeded"
        assert second["assets"] == ["c", "d"]
        assert second["carried"] == {"a": first["run_id"], "b": first["run_id"]}
        record = orjson.loads((runs / f"{second['run_id']}.json").read_bytes())
        assert sorted(a["name"] for a in record["assets"]) == ["c", "d"]
        assert second["verification"]["status"] == "verified", second["verification"]
    shown = run_backfill("show", backfill.name, "--output", "json", cwd=repo.root, env=env)
    latest = [p["attempts"][-1] for p in json.loads(shown.stdout)["partitions"]]
    assert [(a["assets"], sorted(a["carried"])) for a in latest] == [(["c", "d"], ["a", "b"])] * 2


def test_an_asset_marked_succeeded_lets_only_its_downstream_run(chain):
    """`mark --asset c --status succeeded` after c failed: --continue runs only d (c's flag is still there, so
    running c again would fail the partition)."""
    repo, env = chain
    backfill = failed_backfill(repo, env)
    marked = run_backfill("mark", backfill.name, "--status-filter", "failed", "--asset", "c", "--status",
                          "succeeded", "--reason", "loaded by hand", cwd=repo.root, env=env)  # fmt: skip
    assert marked.returncode == 0, marked.stdout + marked.stderr
    again = run_backfill("--continue", backfill.name, "--no-progress", cwd=repo.root, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert ran(env) == ["d 2024-01-01", "d 2024-01-02"]
    for first, mark, third in attempts(backfill):
        assert mark["kind"] == "mark" and mark["asset"] == "c"
        assert third["assets"] == ["d"]
        assert third["carried"] == {"a": first["run_id"], "b": first["run_id"], "c": mark["run_id"]}


def test_rerun_whole_partition_runs_every_asset_again(chain):
    """--rerun-whole-partition keeps the old behaviour: every asset of the failed partitions runs; the attempt
    names no assets of its own (the whole selection ran)."""
    repo, env = chain
    backfill = failed_backfill(repo, env)
    Path(env["FAIL_FLAG"]).unlink()
    again = run_backfill("--continue", backfill.name, "--rerun-whole-partition", "--no-progress",
                         cwd=repo.root, env=env)  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(ran(env)) == 8
    assert all("assets" not in second for _, second in attempts(backfill))


def test_an_asset_whose_file_changed_is_run_again_with_its_downstream(chain):
    """A succeeded asset is carried only over the same definition: b's file edited after the failure runs b
    again (and c, d), while a, unchanged, is carried."""
    repo, env = chain
    backfill = failed_backfill(repo, env)
    Path(env["FAIL_FLAG"]).unlink()
    repo.python("b", BODY.format(name="b", extra="# fixed\n"), depends=["a"])
    again = run_backfill("--continue", backfill.name, "--no-progress", cwd=repo.root, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert [line.split()[0] for line in ran(env)] == ["b", "b", "c", "c", "d", "d"]
    assert {tuple(second["carried"]) for _, second in attempts(backfill)} == {("a",)}


def test_retries_within_a_run_carry_what_succeeded(chain):
    """--retries 1: the retry of a partition failed at c runs c and d only; both attempts fail while the flag
    stays, and the second carries a and b from the first."""
    repo, env = chain
    Path(env["FAIL_FLAG"]).write_text("")
    first = run_backfill("p", *DAYS, "--retries", "1", "--reason", "r", "--no-progress", cwd=repo.root, env=env)
    assert first.returncode == 1, first.stdout + first.stderr
    assert [line.split()[0] for line in ran(env)] == ["a", "a", "b", "b", "c", "c", "c", "c"]
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    assert [second["assets"] for _, second in attempts(backfill)] == [["c", "d"]] * 2


def test_bad_combinations_of_rerun_whole_partition_are_one_line(chain, tmp_path):
    """--rerun-whole-partition without --continue, with --asset, or for a --command backfill: exit 2."""
    repo, env = chain
    backfill = failed_backfill(repo, env)
    alone = run_backfill("p", *DAYS, "--rerun-whole-partition", "--reason", "r", cwd=repo.root, env=env)
    assert alone.returncode == 2 and "--rerun-whole-partition is only accepted together with --continue" in alone.stderr
    partition = orjson.loads(next((backfill / "partitions").glob("*.json")).read_bytes())["id"]
    both = run_backfill("--continue", backfill.name, "--ids", partition, "--asset", "c", "--rerun-whole-partition",
                        "--reason", "r", cwd=repo.root, env=env)  # fmt: skip
    assert both.returncode == 2 and both.stderr.count("\n") == 1, both.stderr
    command = run_backfill("--command", "true", "--guardrails", "sandbox", "--start-date", "2024-01-01",
                           "--end-date", "2024-01-01", "--reason", "r", "--no-progress",
                           "--state-dir", str(tmp_path / "s"), cwd=tmp_path, env=env)  # fmt: skip
    assert command.returncode == 0, command.stderr
    [saved] = state_dirs(tmp_path / "s")
    refused = run_backfill("--continue", saved.name, "--state-dir", str(tmp_path / "s"), "--rerun-whole-partition",
                           "--rerun", "all", "--reason", "r", cwd=tmp_path, env=env)  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert "--rerun-whole-partition means nothing for a --command backfill" in refused.stderr


def test_a_changed_macro_carries_nothing_over(chain):
    """A fix merged in a macro (macros/*.sql) changes every asset's definition: the next --continue runs the whole
    partition, never trusting tables the old macro built."""
    repo, env = chain
    repo.write("p/macros/m.sql", "{% macro one() %}1{% endmacro %}\n")
    backfill = failed_backfill(repo, env)
    Path(env["FAIL_FLAG"]).unlink()
    repo.write("p/macros/m.sql", "{% macro one() %}2{% endmacro %}\n")
    again = run_backfill("--continue", backfill.name, "--no-progress", cwd=repo.root, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(ran(env)) == 8
    assert all("assets" not in second for _, second in attempts(backfill))


def test_a_pipeline_of_a_thousand_assets_resumes_at_its_root(tmp_path, home):
    """1,300 assets downstream of one that failed, each a long name: the resume's selection of them, given as one
    ``--selector`` word, passed the 128 KiB one argument may hold, and the attempt failed to start ("Argument list
    too long"). One selector an asset: the resume starts, runs the root and every asset below it, and carries
    the asset that had succeeded."""
    repo = Repo(tmp_path / "repo")
    env = {**home, "RUNS_LOG": str(tmp_path / "runs.log"), "FAIL_FLAG": str(tmp_path / "fail")}
    repo.python("a", BODY.format(name="a", extra=""))
    repo.python("c", BODY.format(name="c", extra=FAILS))
    long = "generated_asset_with_a_name_as_long_as_a_generated_project_gives_it_to_say_what_it_holds_and_for_whom"
    for number in range(1_300):
        repo.sql(f"g.{long}_{number:04d}", "SELECT 1 AS x", depends=["c"], materialization={"type": "view"})
    Path(env["FAIL_FLAG"]).write_text("")
    day = ("--start-date", "2024-01-01", "--end-date", "2024-01-01")
    first = run_backfill("p", *day, "--reason", "r", "--launcher", "exec", "--no-progress", cwd=repo.root, env=env)
    assert first.returncode == 1, first.stdout + first.stderr
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    Path(env["FAIL_FLAG"]).unlink()
    again = run_backfill("--continue", backfill.name, "--no-progress", cwd=repo.root, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    [[failed, resumed]] = attempts(backfill)
    assert len(" ".join(f"fqn:{name}" for name in resumed["assets"])) > 128 * 1024
    assert (len(resumed["assets"]), resumed["carried"]) == (1_301, {"a": failed["run_id"]})
    assert repo.query(f"SELECT x FROM g.{long}_1299") == [(1,)]
