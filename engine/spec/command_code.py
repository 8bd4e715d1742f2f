"""The code a ``--command`` template names besides itself — the program given as a path, the scripts given to an
interpreter or named in a shell's ``-c`` script, a script not there yet — as a child started in the working
directory opens it: what the plan digest covers and the backfill watches (docs/guardrails.md, "The code a command
names")."""

from __future__ import annotations

import os
import re
import shlex
import stat
from pathlib import Path

NAMED_FILE_LIMIT = 64 * 1024 * 1024  # bytes: hashed at every pre-flight and whenever its stat moves
# What an interpreter named before it runs: a file with one of these suffixes is code, whatever its mode.
SCRIPT_SUFFIXES = frozenset(
    (".py", ".sh", ".bash", ".zsh", ".ksh", ".sql", ".r", ".rb", ".pl", ".js", ".mjs", ".cjs", ".ts", ".php", ".lua",
     ".jl", ".awk", ".sed", ".jar", ".scala", ".groovy", ".ps1", ".tcl")
)  # fmt: skip

SHELLS = frozenset(("sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "busybox"))
SHELL_SUFFIXES = frozenset((".sh", ".bash", ".zsh", ".ksh"))  # a script read for what it sources
_SOURCES_OR_MOVES = re.compile(r"(?:^|[\s;&|(])(?:\.|source|cd)(?:\s|$)")  # a line that may source or cd
# Programs that start the command after them (with options of their own): a shell they start may run a -c script.
WRAPPERS = frozenset(("env", "timeout", "nice", "nohup", "time", "stdbuf", "ionice", "setsid", "flock", "chrt",
                      "taskset", "exec", "xvfb-run"))  # fmt: skip
_SEPARATORS = frozenset((";", "&", "&&", "|", "||", "|&", "(", ")", ";;", "!", "{", "}"))


def named_files(template: str, directory: Path) -> list[Path]:
    """The code a template names — its program given as a path, a script given to an interpreter or as an
    ``--option=FILE`` value (a file with a script's suffix, or executable) — as a child started in ``directory``
    opens it: what every partition runs besides the template itself, so the plan digest covers it and the backfill
    watches it. A shell's ``-c`` script (``sh -c './load.sh {start} >> load.log'``, the way to redirect or pipe) is
    read the same way, word by word. A script named but not there yet (``sh load.sh {start} helpers.sh``) is named
    too: its absence is what was judged, and its appearing later is a change. Passed over: a word holding a
    placeholder (another file each partition), a program found on ``PATH``, data (``out.csv``, which the command
    may well write; a redirection's target), what is not a regular file, and a file over NAMED_FILE_LIMIT."""
    try:
        words = shlex.split(template)
    except ValueError:
        return []  # refused with the template's other errors
    found: list[Path] = []
    for word, program in _command_words(words):
        for named, whole in ((word, True), (word.partition("=")[2], False)):
            if not named or "{" in named or "}" in named:
                continue
            path = directory / named  # an absolute path stays itself
            try:
                info = path.stat()
            except ValueError:  # not a path at all (a NUL byte)
                continue
            except OSError:  # not there (yet): code if it would run as a program, or by a script's suffix
                option = named.startswith("-") or (whole and "=" in named)  # its value is looked at on its own
                text = len(named.split()) != 1  # code given as text (`python -c 'import x; ./load.sh'`)
                script = not option and not text and path.suffix.lower() in SCRIPT_SUFFIXES
                if (("/" in named) if program else script) and path not in found:
                    found.append(path)
                continue
            if not stat.S_ISREG(info.st_mode) or info.st_size > NAMED_FILE_LIMIT or path in found:
                continue
            # A bare program name is looked up on PATH, not in the directory.
            code = path.suffix.lower() in SCRIPT_SUFFIXES or bool(info.st_mode & 0o111)
            if ("/" in named) if program else code:
                found.append(path)
    for script in found:  # grows as it goes: a sourced file's own sources are read in turn
        found.extend(path for path in sourced_files(script, directory) if path not in found and _code_file(path))
    return found


def _code_file(path: Path) -> bool:
    """A regular file of at most NAMED_FILE_LIMIT, or one not there (yet): what can be judged as code. A word with
    a NUL byte is no path at all."""
    try:
        info = path.stat()
    except ValueError:
        return False
    except OSError:
        return True
    return stat.S_ISREG(info.st_mode) and info.st_size <= NAMED_FILE_LIMIT


def sourced_files(script: Path, directory: Path) -> list[Path]:
    """What a shell script sources (``. ./env.sh``, ``source lib.sh``), named from ``directory``, where the shell
    looks for it: code every partition runs though the template does not name it. Read from a script with a
    shell's suffix or ``#!`` line, on the lines where ``.`` or ``source`` stands as a program, the file given as
    text (a word with ``$`` or a backquote is not known before the run); one not there yet is named too
    (``[ -f env.sh ] && . ./env.sh``: its appearing is a change). Nothing else the script runs or reads is named:
    it may well write the files it reads."""
    try:
        text = script.read_text(errors="replace")  # named: at most NAMED_FILE_LIMIT, or not there at all
    except OSError:
        return []
    first = text.split("\n", 1)[0]
    shell = first.startswith("#!") and any(Path(word).name in SHELLS for word in first[2:].split()[:2])
    if not shell and script.suffix.lower() not in SHELL_SUFFIXES:
        return []
    # Only the lines that source or change directory are read word by word (shlex reads 1-2 MB a second), each
    # line a command of its own.
    lines = "\n;".join(line for line in text.splitlines() if _SOURCES_OR_MOVES.search(line))
    found: list[Path] = []
    sourcing = False
    for word, program in _script_words(lines):
        if sourcing and not program and not word.startswith("-") and not any(c in word for c in "$`~"):
            found.append(directory / word)
        sourcing = program and word in (".", "source")
    return found


def _command_words(words: list[str]):
    """Each word a child runs with, and whether it stands where a program does; a shell's ``-c`` script gives its
    own words in its place (a shell started through a wrapper too: ``timeout 600 sh -c …``)."""
    yield words[0], True
    shell = _shell_at(words)
    options = shell == 0  # a shell's options, up to its first operand, may hold -c
    script_next = option_name_next = False
    for position, word in enumerate(words[1:], start=1):
        if script_next:
            yield from _script_words(word)
            script_next = False
            continue
        yield word, False
        if position == shell:
            options = True
        elif option_name_next:  # `-o pipefail`
            option_name_next = False
        elif options and word in ("-o", "+o", "-O", "+O"):
            option_name_next = True
        elif options and word[:1] in "-+" and word != "--" and len(word) > 1:
            script_next = "c" in word[1:]  # `-c`, or flags that end in it (`-ec`)
        else:
            options = False  # `--`, or the first operand (`sh load.sh -c x`: load.sh's own -c)


def _shell_at(words: list[str]) -> int | None:
    """Where the shell is: the program itself, or the first shell a wrapper (``env``, ``timeout``, ``nice``…)
    starts; None when no shell runs the command."""
    if Path(words[0]).name in SHELLS:
        return 0
    if Path(words[0]).name in WRAPPERS:
        return next((i for i, word in enumerate(words) if i and Path(word).name in SHELLS), None)
    return None


def _script_words(script: str):
    """The words of a shell's ``-c`` script, each with whether it stands where a program does (first, after a
    separator or after assignments). A file fed to a program's input (``duckdb w.duckdb < load.sql``) is a word
    like any other (a script given to an interpreter); what a program writes (``>> load.log``), a here-document's
    delimiter and a duplicated descriptor (``2>&1``) are left out. After ``cd DIR`` the words that name files are
    named from DIR (``cd jobs && ./load.sh``: jobs/load.sh); a bare program is still found on PATH."""
    try:
        lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: the shell refuses it in every partition
        return
    program, skip, changes_directory = True, False, False
    directory: str | None = ""  # where `cd` took the script; None: somewhere not known now (`cd $DIR`, `cd -`)
    for token in tokens:
        if skip:
            skip = False  # a written file, a delimiter, a descriptor: no code
        elif token in _SEPARATORS:
            if changes_directory:  # a bare `cd`: the home directory
                directory = None
            program, changes_directory = True, False
        elif token in ("<", "<>"):
            pass  # the next word is read by the program: judged as a word
        elif token[0] in "<>" or token in ("&>", "&>>"):
            skip = True
        elif changes_directory and token.startswith("-") and token != "-":
            pass  # `cd -P DIR`
        elif changes_directory:
            changes_directory = False
            literal = token != "-" and not token.startswith("~") and "$" not in token
            known = literal and (directory is not None or os.path.isabs(token))
            directory = os.path.join(directory or "", token) if known else None  # `cd /abs` replaces it
        else:
            names_a_file = not token.startswith("-") and (not program or "/" in token)
            if names_a_file and directory is None:
                pass  # named from a directory not known now
            elif names_a_file and directory:
                yield os.path.join(directory, token), program
            else:
                yield token, program
            changes_directory = program and token == "cd"
            program = program and "=" in token  # `X=1 ./load.sh`: still a program
