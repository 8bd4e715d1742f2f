"""The code a command template names: what the plan digest covers and the backfill watches besides the
template itself."""

from __future__ import annotations

import os
from pathlib import Path

from engine.spec.command_code import NAMED_FILE_LIMIT, named_files


def test_the_code_a_template_names_is_its_program_its_scripts_and_executables(tmp_path):
    """A program given as a path, a script given to an interpreter (by its suffix, in any case), an ``--option=``
    value (split at its first ``=``), an absolute path and an executable without a suffix (for anyone), each once,
    in the template's order."""
    (tmp_path / "load.sh").write_text("echo")
    (tmp_path / "transform.SQL").write_text("SELECT 1")
    (tmp_path / "tool").write_text("#!/bin/sh")
    (tmp_path / "tool").chmod(0o744)
    (tmp_path / "sub").mkdir()
    other = tmp_path / "sub" / "lib.py"
    other.write_text("pass")
    (tmp_path / "others").write_text("#!/bin/sh")
    (tmp_path / "others").chmod(0o641)  # executable by others only
    (tmp_path / "v=1.sh").write_text("echo")
    template = f"./load.sh {{start}} --sql=transform.SQL {other} sh load.sh tool sub missing.txt others --o=v=1.sh"
    assert named_files(template, tmp_path) == [
        tmp_path / "load.sh", tmp_path / "transform.SQL", other, tmp_path / "tool", tmp_path / "others",
        tmp_path / "v=1.sh",
    ]  # fmt: skip


def test_data_a_placeholder_a_large_file_and_what_is_no_file_are_passed_over(tmp_path):
    """``out.csv`` is data the command may write (watching it would stop the backfill after its first partition);
    ``{start}.sql`` names another file each partition; a file over the limit, a FIFO, a directory, a NUL byte,
    unbalanced quotes and a bare program (found on PATH, not here) name nothing."""
    (tmp_path / "out.csv").write_text("a,b")
    (tmp_path / "{start}.sql").write_text("SELECT 1")
    (tmp_path / "big.sql").write_bytes(b"")
    os.truncate(tmp_path / "big.sql", NAMED_FILE_LIMIT + 1)
    (tmp_path / "limit.sql").write_bytes(b"")
    os.truncate(tmp_path / "limit.sql", NAMED_FILE_LIMIT)
    os.mkfifo(tmp_path / "pipe.sh")
    (tmp_path / "dir.sh").mkdir()
    (tmp_path / "run.sh").write_text("echo")
    (tmp_path / "a{.sh").write_text("x")  # a lone brace: refused with the template, never a file here
    (tmp_path / "b}.sh").write_text("x")
    template = "run.sh out.csv {start}.sql big.sql limit.sql pipe.sh dir.sh 'a\0b.sh' a{.sh b}.sh"
    assert named_files(template, tmp_path) == [tmp_path / "limit.sql"]
    assert named_files("sh 'run.sh", tmp_path) == []


def test_a_script_not_there_yet_is_named_for_its_absence(tmp_path):
    """``sh load.sh helpers.sh``: a script it names that is not there yet is judged absent (appearing later is a
    change); so is a program given as a path and an ``--option=`` value, by its own name. Not an option itself, a
    missing file without a script's suffix, nor ``key=value`` taken whole."""
    (tmp_path / "load.sh").write_text("echo")
    template = "./gone.sh load.sh helpers.sh --lib=lib.PY -x.sh out.csv make=b.rb helpers.sh"
    assert named_files(template, tmp_path) == [
        tmp_path / "gone.sh",
        tmp_path / "load.sh",
        tmp_path / "helpers.sh",
        tmp_path / "lib.PY",
        tmp_path / "b.rb",
    ]
    # Right after the interpreter; an option's value holding "=" of its own (that value taken whole).
    assert named_files("sh gone.sh --opt=k=gone.rb", tmp_path) == [tmp_path / "gone.sh", tmp_path / "k=gone.rb"]


def test_a_shell_s_script_is_read_word_by_word(tmp_path):
    """``sh -c './load.sh {start} >> load.log'`` (the way to redirect or pipe): the script's words are read as the
    template's are — its programs given as paths, the scripts given to an interpreter, one not there yet — past
    options before ``-c`` (``-o pipefail``, ``-ec``) and assignments before a program; a redirection's target is
    data. An interpreter's ``-c`` that is not a shell's, and a ``-c`` after the shell's script, are no script."""
    for name in ("load.sh", "run", "sub.py", "x.sh"):
        (tmp_path / name).write_text("echo")
    (tmp_path / "run").chmod(0o755)
    assert named_files("sh -c './load.sh {start} >> x.sh'", tmp_path) == [tmp_path / "load.sh"]
    script = "cd . && X=1 ./run {start} | tee out.log; python sub.py 2>&1 > x.sh; sh later.sh; ./gone; Y=2 ./absent"
    assert named_files(f"/bin/bash -o pipefail -ec '{script}'", tmp_path) == [
        Path("/bin/bash"),
        tmp_path / "run",
        tmp_path / "sub.py",
        tmp_path / "later.sh",
        tmp_path / "gone",
        tmp_path / "absent",
    ]  # the shell given as a path is hashed, as any program so given
    # A script fed to a program's input is read like a word; what a program writes, a here-document's delimiter
    # and a descriptor are not.
    assert named_files("sh -c 'duckdb w.duckdb < sub.py 2>&1 >> load.sh; cat <<load.sh'", tmp_path) == [
        tmp_path / "sub.py"
    ]
    assert named_files("python -c 'import x; ./load.sh'", tmp_path) == []
    # A shell started through a wrapper; not a shell named as another program's argument.
    assert named_files("timeout -s INT 600 nice -n 5 bash -ec './load.sh {start}'", tmp_path) == [tmp_path / "load.sh"]
    assert named_files("env X=1 sh -c 'python sub.py'", tmp_path) == [tmp_path / "sub.py"]
    assert named_files("python -m tool sh -c run", tmp_path) == [tmp_path / "run"]
    # x.sh's own -c: `run` is its argument (an executable named), not a script's bare program (found on PATH)
    assert named_files("sh x.sh -c run", tmp_path) == [tmp_path / "x.sh", tmp_path / "run"]
    assert named_files("sh -c 'echo \"unbalanced'", tmp_path) == []


def test_a_shell_s_options_and_script_are_told_apart_from_what_follows(tmp_path):
    """The words after a shell's script are its arguments, not more script; every option that takes a name
    (``-o``, ``+o``, ``-O``, ``+O``) is passed over with it; ``--`` and ``-`` end the options; a wrapper that
    starts no shell leaves its words as they are. ``run`` is an executable here: named as an argument it is code,
    as a script's bare program it is found on PATH."""
    for name in ("load.sh", "run", "x.sh", "v1,2.py"):
        (tmp_path / name).write_text("echo")
    (tmp_path / "run").chmod(0o755)
    assert named_files("sh -c true run", tmp_path) == [tmp_path / "run"]
    assert named_files("bash +o posix -O extglob +O nullglob -o errexit -c './load.sh {start}'", tmp_path) == [
        tmp_path / "load.sh"
    ]
    assert named_files("sh -- -c run", tmp_path) == [tmp_path / "run"]
    assert named_files("sh - -c run", tmp_path) == [tmp_path / "run"]
    assert named_files("env X=1 ./load.sh {start}", tmp_path) == [tmp_path / "load.sh"]
    assert named_files("sh -c 'run x'", tmp_path) == []


def test_a_shell_s_script_is_split_as_the_shell_splits_it(tmp_path):
    """Quotes inside the script are the shell's (``'sub.py'`` names sub.py), words split at blanks only (a comma
    is part of a name), ``<>`` opens a file the program reads, ``&>`` and ``&>>`` name files it writes."""
    for name in ("sub.py", "x.sh", "v1,2.py"):
        (tmp_path / name).write_text("pass")
    assert named_files("""sh -c "python 'sub.py' v1,2.py" """, tmp_path) == [tmp_path / "sub.py", tmp_path / "v1,2.py"]
    assert named_files("sh -c 'duckdb <> x.sh'", tmp_path) == [tmp_path / "x.sh"]
    assert named_files("sh -c 'true &> x.sh; true &>> x.sh; true >& x.sh'", tmp_path) == []


def test_a_shell_s_script_names_files_from_where_cd_took_it(tmp_path):
    """``cd jobs && ./load.sh``: the files after it are named from jobs/ (not the ones of the same name beside the
    template), through ``cd -P`` and from an absolute directory too; a bare program is still found on PATH. After
    ``cd`` to a directory not known now (``-``, home, a variable) no file is named."""
    (tmp_path / "jobs").mkdir()
    for name in ("load.sh", "run.py", "jobs/load.sh", "jobs/run.py"):
        (tmp_path / name).write_text("echo")
    jobs = tmp_path / "jobs"
    assert named_files("sh -c 'cd jobs && ./load.sh {start}; python run.py'", tmp_path) == [
        jobs / "load.sh", jobs / "run.py"
    ]  # fmt: skip
    assert named_files("sh -c 'cd -P jobs && ./load.sh'", tmp_path) == [jobs / "load.sh"]
    assert named_files(f"sh -c 'cd {jobs}; sh load.sh'", Path("/")) == [jobs / "load.sh"]
    assert named_files(f"sh -c 'cd; cd {jobs} && sh load.sh'", tmp_path) == [jobs / "load.sh"]  # known again
    assert named_files("sh -c 'cd . ; cd jobs; python run.py'", tmp_path) == [jobs / "run.py"]
    for away in ("cd - && ./load.sh", "cd; ./load.sh", "cd $JOBS && python run.py", "cd ~ && ./load.sh"):
        assert named_files(f"sh -c '{away}'", tmp_path) == [], away


SOURCING_SCRIPT = """\
set -e
# . ./commented.sh
source lib/common.sh
[ -f env.sh ] && . ./env.sh
. "$(dirname "$0")/found-at-run-time.sh"
source $HOME/profile.sh
source ~/profile.sh
python gen.py > out.sql
cd jobs
source inner.sh
"""


def test_what_a_shell_script_sources_is_named_with_it(tmp_path):
    """A named shell script's ``. FILE`` and ``source FILE`` lines name their files from the working directory
    (after a ``cd``, from there), one not there yet too, and what those source in turn; a commented line, a file
    known only at run time (``$``, ``~``) and whatever else the script runs or writes are not named."""
    (tmp_path / "load.sh").write_text(SOURCING_SCRIPT)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "common.sh").write_text(". ./lib/deeper.sh\nsource ./load.sh\n")
    (tmp_path / "lib" / "deeper.sh").write_text("X=1\n")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "inner.sh").write_text("")
    (tmp_path / "gen.py").write_text("")
    (tmp_path / "out.sql").write_text("")
    assert named_files("sh load.sh {start}", tmp_path) == [
        tmp_path / "load.sh", tmp_path / "lib" / "common.sh", tmp_path / "env.sh", tmp_path / "jobs" / "inner.sh",
        tmp_path / "lib" / "deeper.sh",
    ]  # fmt: skip


def test_only_a_shell_script_is_read_for_what_it_sources(tmp_path):
    """A script with a shell's suffix (any case) or ``#!`` line (``env bash`` too) is read; a Python or SQL script
    holding the same words is not, nor a script over the size limit."""
    (tmp_path / "lib.sh").write_text("")
    for name, text in (("a.BASH", ""), ("run", "#!/usr/bin/env bash\n"), ("b", "#!/bin/sh -e\n")):
        (tmp_path / name).write_text(text + ". ./lib.sh\n")
        (tmp_path / name).chmod(0o755)
        assert named_files(f"./{name} {{start}}", tmp_path) == [tmp_path / name, tmp_path / "lib.sh"], name
    for name in ("load.py", "load.sql"):
        (tmp_path / name).write_text("source lib.sh\n. ./lib.sh\n")
        assert named_files(f"python {name} {{start}}", tmp_path) == [tmp_path / name], name
    (tmp_path / "big.sh").write_text(". ./lib.sh\n" + "#" * NAMED_FILE_LIMIT)
    assert named_files("sh big.sh", tmp_path) == []  # over the limit: neither it nor what it sources
    (tmp_path / "sources.sh").write_text(". ./big.sh\n. ./lib\n. ./lib.sh\n")
    (tmp_path / "lib").mkdir()
    # a file over the limit or a directory sourced is not judged as code, as when the template names it
    assert named_files("sh sources.sh", tmp_path) == [tmp_path / "sources.sh", tmp_path / "lib.sh"]
    (tmp_path / "nul.sh").write_bytes(b". ./a\0b.sh\n. ./lib.sh\n")  # a word with a NUL byte is no path
    assert named_files("sh nul.sh", tmp_path) == [tmp_path / "nul.sh", tmp_path / "lib.sh"]
