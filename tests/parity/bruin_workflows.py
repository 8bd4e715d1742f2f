"""Bruin's own integration workflows, run with ``backfill run``: a parity probe, by hand, against a Bruin checkout.

Bruin's ``integration-tests/integration_test.go`` runs ``bruin run`` over its test pipelines and checks the exit
code and, with ``bruin query``, the tables each run left. This reads those steps from the Go source (its
composite literals, not compiled), runs each workflow in a scratch copy of ``integration-tests`` with our
``backfill run`` in place of ``bruin run``, and compares the exit codes (zero or not) and every table a step
checks (``--output csv`` and ``--output json`` expectations), read here with DuckDB. Output text is Bruin's own
and is not compared. Not part of the suite (it needs a Bruin checkout, which CI does not have); see
docs/testing.md for the last run's figures.

Usage: python tests/parity/bruin_workflows.py BRUIN_CHECKOUT [WORKFLOW ...]
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import yaml

BACKFILL = str(Path(sys.executable).with_name("backfill"))
FOLDER = "@IT/"  # filepath.Join(currentFolder, …): the scratch copy of integration-tests
YESTERDAY = "time.Now().AddDate(0, 0, -1)"  # the one expression a step's expectation holds
SHELL_COMMANDS = ('"cp"', '"mkdir"', '"rm"', '"git"')


def closing_brace(text: str, start: int) -> int:
    """The index of the brace closing the one at ``start``, strings skipped."""
    depth, index, quote = 0, start, None
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\" and quote == '"':
                index += 1
            elif char == quote:
                quote = None
        elif char in '"`':
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
        index += 1
    raise ValueError("unbalanced braces")


def joined(parts: str, base: str) -> str:
    return base + "/".join(re.findall(r'"([^"]*)"', parts))


def string_list(body: str) -> list[str]:
    """A ``[]string{…}`` body: literals, ``filepath.Join(currentFolder|tempdir, …)``; anything else kept as
    ``@EXPR:`` (a step using one is skipped)."""
    items, index = [], 0
    while index < len(body):
        char = body[index]
        if char in " \t\n,":
            index += 1
        elif char == '"':
            match = re.match(r'"((?:[^"\\]|\\.)*)"', body[index:])
            items.append(json.loads(f'"{match.group(1)}"'))
            index += match.end()
        elif char == "`":
            end = body.index("`", index + 1)
            items.append(body[index + 1 : end])
            index = end + 1
        elif match := re.match(r"filepath\.Join\((currentFolder|tempdir),\s*((?:\"[^\"]*\"\s*,?\s*)+)\)", body[index:]):
            items.append(joined(match.group(2), FOLDER if match.group(1) == "currentFolder" else "@TMP/"))
            index += match.end()
        else:
            depth, end = 0, index
            while end < len(body) and not (body[end] == "," and depth == 0):
                depth += (body[end] in "([{") - (body[end] in ")]}")
                end += 1
            expression = body[index:end].strip()
            items.append(FOLDER.rstrip("/") if expression == "currentFolder" else "@EXPR:" + expression)
            index = end
    return items


def field_list(block: str, name: str) -> list[str] | None:
    match = re.search(rf"\n\s*{name}:\s*\[\]string\{{", block)
    if match is None:
        return None
    start = match.end() - 1
    return string_list(block[start + 1 : closing_brace(block, start)])


def read_steps(source: str) -> dict[str, list[dict]]:
    """Every step (``e2e.Task``) of the Go source, by the test or workflow it belongs to, in order."""
    workflows: dict[str, list[dict]] = {}
    names = [(m.start(), m.group(1)) for m in re.finditer(r'\n\s*name:\s*"([^"]*)"', source)]
    for match in re.finditer(r'\{\s*\n\s*Name:\s*"([^"]*)"', source):
        block = source[match.start() : closing_brace(source, match.start()) + 1]
        if "Steps:" in block:
            continue  # a workflow itself, not one of its steps
        step: dict = {"name": match.group(1), "args": field_list(block, "Args") or [], "env": field_list(block, "Env")}
        command = re.search(r"\n\s*Command:\s*([^,\n]+),", block)
        step["command"] = command.group(1).strip() if command else None
        exit_code = re.search(r"ExitCode:\s*(\d+)", block)
        step["exit"] = int(exit_code.group(1)) if exit_code else 0
        if directory := re.search(r"\n\s*WorkingDir:\s*([^\n]+),\n", block):
            step["workdir"] = string_list(directory.group(1))[0]
        if expected := re.search(r"CSVFile:\s*filepath\.Join\(currentFolder,\s*((?:\"[^\"]*\"\s*,?\s*)+)\)", block):
            step["csv"] = joined(expected.group(1), FOLDER)
        pattern = r"Output:\s*helpers\.ReadFile\(filepath\.Join\(currentFolder,\s*((?:\"[^\"]*\"\s*,?\s*)+)\)\)"
        if expected := re.search(pattern, block):
            step["json"] = joined(expected.group(1), FOLDER)
        if (contains := field_list(block, "Contains")) is not None:
            step["contains"] = contains
        if table := re.search(r'Output:\s*"((?:[^"\\]|\\.)*)"', block):
            step["table"] = json.loads(f'"{table.group(1)}"')  # a box-drawn table, as `bruin query` prints one
        owner = [name for start, name in names if start < match.start()][-1]
        workflows.setdefault(owner, []).append(step)
    return workflows


def cell(value: str) -> tuple:
    """A value as both sides print it: Go's JSON renders a DATE as a midnight timestamp, booleans differ in case,
    numbers in their digits."""
    text = value.strip()
    if text.lower() in ("true", "false"):
        return ("bool", text.lower())
    try:
        return ("number", round(float(text), 6))
    except ValueError:
        pass
    text = re.sub(r"(\d)T(\d)", r"\1 \2", text).removesuffix("Z").replace("+00:00", "")
    text = re.sub(r" 00:00:00$", "", text)
    return ("null",) if text in ("", "<nil>", "NULL") else ("text", text)


def query_rows(args: list[str]) -> list[list[tuple]] | str:
    """What ``bruin query --query Q`` returns, read here: the rows, or why they cannot be read."""
    options = {args[i]: args[i + 1] for i in range(1, len(args) - 1) if args[i].startswith("--")}
    if "--query" not in options:
        return "a query of an asset's own SQL: not read here"
    config = Path(options["--config-file"])
    data = yaml.safe_load(config.read_text())
    environment = options.get("--env", data.get("default_environment", "default"))
    name = options.get("--connection") or asset_connection(Path(options["--asset"]))
    paths = [c["path"] for c in data["environments"][environment]["connections"].get("duckdb", []) if c["name"] == name]
    if not paths:
        return f"no DuckDB connection {name!r}"
    database = Path(paths[0]) if Path(paths[0]).is_absolute() else config.parent / paths[0]
    if not database.exists():
        return f"{database} was never written"
    with duckdb.connect(str(database), read_only=True) as connection:
        rows = connection.execute(options["--query"]).fetchall()
    return [[cell("" if value is None else str(value)) for value in row] for row in rows]


def asset_connection(asset: Path) -> str:
    if match := re.search(r"^connection:\s*(\S+)", asset.read_text(), re.MULTILINE):
        return match.group(1).strip("\"'")
    directory = asset.parent
    while not (directory / "pipeline.yml").exists():
        directory = directory.parent
    pipeline = yaml.safe_load((directory / "pipeline.yml").read_text()) or {}
    return (pipeline.get("default_connections") or {}).get("duckdb", "duckdb-default")


def expected_rows(step: dict, resolve) -> list[list[tuple]]:
    if "table" in step and "│" in step["table"]:
        lines = [line.strip("│").split("│") for line in step["table"].splitlines() if line.startswith("│")]
        return [[cell(value) for value in line] for line in lines[1:]]
    if "table" in step:  # printed as CSV
        return [[cell(value) for value in row] for row in list(csv.reader(io.StringIO(step["table"].strip())))[1:]]
    if "csv" in step:
        return [
            [cell(value) for value in row] for row in list(csv.reader(io.StringIO(resolve(step["csv"]).strip())))[1:]
        ]
    rows = json.loads(resolve(step["json"])).get("rows") or []
    return [[cell("" if value is None else str(value)) for value in row] for row in rows]


def run_workflow(name: str, steps: list[dict], checkout: Path, scratch: Path) -> list[tuple[str, str, str]]:
    """Each step's verdict: OK, EXIT (zero against non-zero), DATA (a table differs) or SKIP (with why)."""
    work, temporary = scratch / name / "integration-tests", scratch / name / "tmp"
    shutil.copytree(checkout / "integration-tests", work, ignore=shutil.ignore_patterns("cloud-integration-tests"))
    temporary.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    for directory in ("duckdb-files", "logs/runs", "logs/exports"):
        (work / directory).mkdir(parents=True, exist_ok=True)

    def place(word: str) -> str:
        if word.startswith("@EXPR:"):
            raise LookupError(word)
        return word.replace(FOLDER, f"{work}/").replace("@TMP/", f"{temporary}/").replace(FOLDER.rstrip("/"), str(work))

    verdicts = []
    for step in steps:
        try:
            args = [place(word) for word in step["args"]]
            cwd = place(step.get("workdir", FOLDER.rstrip("/")))
        except LookupError as error:
            verdicts.append((step["name"], "SKIP", f"an expression this reader does not evaluate: {error}"))
            break
        if step["command"] in SHELL_COMMANDS:
            subprocess.run([step["command"].strip('"'), *args], cwd=cwd, capture_output=True)
            continue
        verb = args[0] if args and step["command"] == "binary" else None
        if verb == "run":
            if "--full-refresh" in args and "--reason" not in args:
                args = ["run", "--reason", "parity probe", *args[1:]]  # a rule of ours: a full refresh says why
            env = {**os.environ, "NO_COLOR": "1", **dict(e.split("=", 1) for e in step["env"] or [] if "=" in e)}
            done = subprocess.run([BACKFILL, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
            agree = (done.returncode == 0) == (step["exit"] == 0)
            said = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or [""]
            verdicts.append(
                (
                    step["name"],
                    "OK" if agree else "EXIT",
                    f"bruin {step['exit']}, ours {done.returncode}: {said[0][:200]}",
                )
            )
        elif verb == "query" and ("csv" in step or "json" in step or "table" in step or "contains" in step):
            if "--config-file" not in args:
                args += ["--config-file", str(work / ".bruin.yml")]
            got = query_rows(args)
            if isinstance(got, str):
                verdicts.append((step["name"], "SKIP", got))
                continue
            if "contains" in step:
                yesterday = (datetime.now().astimezone() - timedelta(days=1)).strftime("%Y-%m-%d")  # Go: local time
                step["contains"] = [yesterday if YESTERDAY in text else text for text in step["contains"]]
                printed = " ".join(str(value[-1]) for row in got for value in row)
                missing = [text for text in step["contains"] if text not in printed]
                verdicts.append((step["name"], "DATA" if missing else "OK", f"missing {missing} in {got[:3]}"))
                continue
            expected = expected_rows(step, lambda path: Path(place(path)).read_text())
            verdicts.append(
                (
                    step["name"],
                    "OK" if got == expected else "DATA",
                    "" if got == expected else f"expected {expected[:3]}, got {got[:3]}",
                )
            )
        else:
            verdicts.append((step["name"], "SKIP", f"not compared: {step['command']} {verb or ''}".strip()))
    return verdicts


def main() -> int:
    checkout = Path(sys.argv[1])
    wanted = set(sys.argv[2:])
    workflows = read_steps((checkout / "integration-tests" / "integration_test.go").read_text())
    scratch = Path(tempfile.mkdtemp(prefix="bruin-parity-"))
    counts: dict[str, int] = {}
    for name, steps in workflows.items():
        runs = any(s["command"] == "binary" and s["args"][:1] == ["run"] for s in steps)
        if not runs or (wanted and name not in wanted):
            continue
        for step, verdict, detail in run_workflow(name, steps, checkout, scratch):
            counts[verdict] = counts.get(verdict, 0) + 1
            if verdict != "OK":
                print(f"{verdict:5} {name}: {step}: {detail}")
    print(" ".join(f"{verdict} {count}" for verdict, count in sorted(counts.items())))
    shutil.rmtree(scratch, ignore_errors=True)
    return 1 if counts.get("DATA") else 0


if __name__ == "__main__":
    sys.exit(main())
