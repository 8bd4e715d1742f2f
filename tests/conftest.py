"""Shared fixtures: how to run the real ``backfill`` command, and a private copy of the example repository."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "shop"


def pytest_configure(config: pytest.Config) -> None:
    """Compile the project's modules before any test (a no-op once they are): where PYTHONDONTWRITEBYTECODE is set,
    as on CI's machine, an editable install has no bytecode cache, and every `backfill` process a test starts would
    compile them all again (0.4–1 s each; docs/testing.md)."""
    import compileall

    for package in ("engine", "tui", "tests"):
        compileall.compile_dir(ROOT / package, quiet=2)


def backfill_argv() -> list[str]:
    """The installed console script when there is one, else the module."""
    script = Path(sys.executable).with_name("backfill")
    return [str(script)] if script.exists() else [sys.executable, "-m", "tui"]


def run_backfill(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``backfill ARGS`` as a real process and capture its output."""
    environment = {**os.environ, "NO_COLOR": "1", **(env or {})}
    environment.pop("BRUIN_VARS", None) if "BRUIN_VARS" not in (env or {}) else None
    return subprocess.run(
        [*backfill_argv(), *args],
        cwd=cwd or ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
    )


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A private git repository holding a copy of the example (returns the repository root)."""
    repo = tmp_path / "shop"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("*.duckdb", "*.wal", "logs"))
    (repo / ".git").mkdir()  # enough to be recognised as a repository root
    return repo


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """An isolated HOME/XDG environment, so nothing touches the real user directories."""
    base = tmp_path / "home"
    base.mkdir()
    return {
        "HOME": str(base),
        "XDG_STATE_HOME": str(base / ".local/state"),
        "XDG_DATA_HOME": str(base / ".local/share"),
        "XDG_CONFIG_HOME": str(base / ".config"),
    }


@pytest.fixture
def work(tmp_path: Path, home) -> Path:
    """A working directory inside a (marker) git repository, with HOME isolated by ``home``."""
    directory = tmp_path / "work"
    (directory / ".git").mkdir(parents=True)
    return directory


@pytest.fixture(scope="session")
def wall_step(tmp_path_factory) -> Path:
    """The wall-step shim, compiled once per worker: the test fails, never skips, without a C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.fail("no C compiler (cc or gcc) to build tests/native/wall_step.c")
    library = tmp_path_factory.mktemp("native") / "wall_step.so"
    source = ROOT / "tests" / "native" / "wall_step.c"
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(source), "-ldl"], check=True)
    return library


@contextlib.contextmanager
def tmpfs(directory: Path, size: str):
    """A tmpfs of ``size`` (``64k``) mounted on ``directory`` for the block (root only: the caller checks)."""
    directory.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)], check=True)
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A 64 KiB tmpfs: a disk that fills (root only, as CI runs; skipped elsewhere)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs needs root (CI runs as root)")
    with tmpfs(tmp_path / "disk", "64k") as disk:
        yield disk
