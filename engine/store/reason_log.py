"""``reasons.log`` and ``signatures.log``: the failure reasons the record index points at, so that triage and the
text filter over a hundred thousand failures read no record file.

Derived like ``partitions.idx`` and written by its one writer, before a row's values (see ``record_index``): a
row that is not pending points at whole lines. Both files begin with a line naming the index's *token* (random
bytes written in its header when it was built); a reader uses their lines only when the tokens agree, and reads
the record files otherwise. Lines:

- ``reasons.log``: one per reason written, ``<partition number> <the reason as a JSON string>``, or ``* <…>`` for
  the one reason of every partition a bulk mark names; a row holds its line's offset (0: no reason) and the ID of
  its signature;
- ``signatures.log``: one JSON string per line, the signature with ID *n* on line *n* after the first (ID 0 is
  "no reason recorded"). A signature is computed once, when its reason is written.

A line a killed writer left unfinished is never pointed at (its row stayed pending); the next writer cuts it off
``signatures.log``, whose line numbers are its IDs, and writes after it in ``reasons.log``.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from pathlib import Path

import orjson

from engine.base.atomic import write_atomic
from engine.store.failure_signature import NO_REASON, signature

REASONS = "reasons.log"
SIGNATURES = "signatures.log"
_REASONS_MAGIC = b"BFREASON1 "
_SIGNATURES_MAGIC = b"BFSIGNAT1 "


class ReasonsMismatch(Exception):
    """The reason files are missing, damaged or belong to another build of the index: it must be rebuilt."""


def _first_line(magic: bytes, token: bytes) -> bytes:
    return magic + token.hex().encode() + b"\n"


def write_reason_logs(directory: Path, token: bytes, reasons: dict[int, str]) -> dict[int, tuple[int, int]]:
    """New reason files for an index built with ``token`` holding ``reasons`` (partition number → reason); each
    partition's (signature ID, line offset)."""
    ids: dict[str, int] = {}
    signature_lines = [_first_line(_SIGNATURES_MAGIC, token)]
    reason_lines = [_first_line(_REASONS_MAGIC, token)]
    offset = len(reason_lines[0])
    placed = {}
    for index in sorted(reasons):
        key = signature(reasons[index])
        if key not in ids:
            ids[key] = len(signature_lines)
            signature_lines.append(orjson.dumps(key) + b"\n")
        line = _reason_line(index, reasons[index])
        placed[index] = (ids[key], offset)
        reason_lines.append(line)
        offset += len(line)
    for name, lines in ((SIGNATURES, signature_lines), (REASONS, reason_lines)):
        write_atomic(directory / name, b"".join(lines), durable=False)  # derived: a reboot rebuilds them anyway
    return placed


def remove_reason_logs(directory: Path) -> None:
    for name in (REASONS, SIGNATURES):
        with contextlib.suppress(OSError):
            os.unlink(directory / name)


def _reason_line(index: int, reason: str) -> bytes:
    return b"%d " % index + orjson.dumps(reason) + b"\n"


class ReasonLog:
    """The reason files as the index's writer appends to them. Thread-safe."""

    def __init__(self, directory: Path, token: bytes) -> None:
        self._lock = threading.Lock()
        self._fds: list[int] = []
        try:
            for name in (SIGNATURES, REASONS):
                self._fds.append(os.open(directory / name, os.O_RDWR | os.O_CLOEXEC))
            self._signatures_fd, self._reasons_fd = self._fds
            self._ids, self._signatures_end = self._read_signatures(token)
            first = _first_line(_REASONS_MAGIC, token)
            if os.pread(self._reasons_fd, len(first), 0) != first:
                raise ReasonsMismatch
            self._reasons_end = os.fstat(self._reasons_fd).st_size
        except (OSError, ValueError, ReasonsMismatch):  # missing, unreadable, garbled or another index's
            self.close()
            raise ReasonsMismatch from None

    def _read_signatures(self, token: bytes) -> tuple[dict[str, int], int]:
        size = os.fstat(self._signatures_fd).st_size
        data = os.pread(self._signatures_fd, size, 0)
        first = _first_line(_SIGNATURES_MAGIC, token)
        if not data.startswith(first):
            raise ReasonsMismatch
        whole = data[: data.rfind(b"\n") + 1]
        if len(whole) != size:  # a line a killed writer left unfinished: no row points at it
            os.ftruncate(self._signatures_fd, len(whole))
        lines = whole[len(first) :].splitlines()
        return {orjson.loads(line): number for number, line in enumerate(lines, start=1)}, len(whole)

    def add(self, index: int, reason: str) -> tuple[int, int]:
        """Append ``reason`` of partition ``index`` (and its signature, the first time it is seen); its (signature
        ID, line offset). Raises OSError when a line cannot be written whole."""
        return self._add(_reason_line(index, reason), reason)

    def add_shared(self, reason: str) -> tuple[int, int]:
        """Append ``reason`` once for every partition of a bulk mark: a line that names no partition."""
        return self._add(b"* " + orjson.dumps(reason) + b"\n", reason)

    def _add(self, line: bytes, reason: str) -> tuple[int, int]:
        key = signature(reason)
        with self._lock:
            number = self._ids.get(key)
            if number is None:
                entry = orjson.dumps(key) + b"\n"
                self._append(self._signatures_fd, entry, self._signatures_end)
                self._signatures_end += len(entry)
                number = self._ids[key] = len(self._ids) + 1
            offset = self._reasons_end
            self._append(self._reasons_fd, line, offset)
            self._reasons_end += len(line)
        return number, offset

    @staticmethod
    def _append(fd: int, data: bytes, offset: int) -> None:
        if os.pwrite(fd, data, offset) != len(data):
            raise OSError  # a short write (a full disk): the caller gives the index up

    def close(self) -> None:
        while self._fds:
            os.close(self._fds.pop())


class Reasons:
    """The reason files as a reader finds them, for an index with ``token``: signatures by ID, reasons by offset.
    An answer of None means "not here": read the partition's record instead."""

    def __init__(self, signatures: list[str], reasons: mmap.mmap) -> None:
        self.signatures = signatures
        self._reasons = reasons

    @classmethod
    def open(cls, directory: Path, token: bytes) -> Reasons | None:
        """The files when they belong to the index with ``token``, else None."""
        try:
            data = (directory / SIGNATURES).read_bytes()
            fd = os.open(directory / REASONS, os.O_RDONLY | os.O_CLOEXEC)
            try:
                reasons = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)  # an empty file is no reason file: ValueError
            finally:
                os.close(fd)
        except (OSError, ValueError):
            return None
        first = _first_line(_SIGNATURES_MAGIC, token)
        if not data.startswith(first) or reasons[: len(first)] != _first_line(_REASONS_MAGIC, token):
            return None
        whole = data[len(first) : data.rfind(b"\n") + 1]  # a line being written is not whole yet: no row uses it
        try:
            signatures = [NO_REASON, *(orjson.loads(line) for line in whole.splitlines())]
        except orjson.JSONDecodeError:
            return None
        return cls(signatures, reasons)

    def reason(self, index: int, offset: int) -> str | None:
        """The reason at ``offset``, written for partition ``index`` (or for every partition of a bulk mark); None
        when no whole line of that partition is there."""
        end = self._reasons.find(b"\n", offset)
        if end < 0:
            return None
        number, _, text = self._reasons[offset:end].partition(b" ")
        if number != b"%d" % index and number != b"*":
            return None
        try:
            reason = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        return reason if isinstance(reason, str) else None
