"""The state store of one backfill: ``<root>/<backfill-id>/``.

::

    manifest.json                 immutable inputs (regenerate the plan from these)
    partitions/<partition-id>.json one per attempted partition, written atomically
    children/<run-id>.log         stdout and stderr of each attempt
    .lock                         held by the executor while it runs
    .children.lock                held by the executor and every child it started
    .generation.json              which executor (generation, PID, start time, Dask scheduler) runs or ran last

Directories are 0700 and files 0600: they hold variable overrides.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import DIRECTORY_MODE, ensure_directory, remove_stale_temporaries, sync_directory, write_atomic
from engine.base.errors import BadInput, StateUnreadable, StateWriteFailed
from engine.dates.formatting import InstantFormatter
from engine.dates.plan import Plan
from engine.store.bulk_marks import BULK_MARKS, BulkMark, merge, read_bulk_marks, write_bulk_mark
from engine.store.locks import FileLock
from engine.store.manifest import now_text
from engine.store.reason_log import ReasonsMismatch, remove_reason_logs
from engine.store.record_index import (
    INDEX,
    Columns,
    IndexedBoard,
    RecordIndex,
    index_row,
    mark_row,
    read_indexed,
    reason_of,
    row_of,
    settled,
    stamp_of,
    trusted_columns,
    write_index,
)
from engine.store.records import LIVE_ATTEMPT_STATUSES, PartitionRecord, RecordStatus, read_record, status_of
from engine.store.split_tree import SPLITS, half_path, read_tree, settle_node
from engine.store.status import Status, StatusBoard

BACKFILLS_DIR = ("logs", "backfills")
MANIFEST = "manifest.json"


def default_state_root(repository: Path | None) -> Path:
    """``<repository>/logs/backfills``, or the user state directory outside a repository."""
    if repository is not None:
        return repository.joinpath(*BACKFILLS_DIR)
    from engine.store.user_state import user_state_dir

    return user_state_dir() / "backfills"


def check_state_root(root: Path) -> None:
    """The state root exists (made if missing) and is a writable directory, or the error says what is wrong."""
    try:
        ensure_directory(root, DIRECTORY_MODE)
        usable = root.is_dir() and os.access(root, os.W_OK | os.X_OK)
    except OSError as error:
        raise BadInput(
            f"state directory {_shown(root)} cannot be used ({error.strerror}): give a writable directory"
        ) from None
    if not usable:
        raise BadInput(f"state directory {_shown(root)} is not a writable directory: give one that is")
    try:  # /proc and read-only mounts pass the access test and refuse the directory itself
        os.rmdir(tempfile.mkdtemp(prefix=f"{BUILD_PREFIX}{os.getpid()}.probe.", dir=root))
    except OSError as error:
        raise BadInput(
            f"state directory {_shown(root)} cannot hold backfills ({error.strerror}): give a writable one"
        ) from None


BUILD_PREFIX = ".building-"


def saved_backfill_dirs(root: Path) -> list[Path]:
    """Every backfill directory under ``root`` (unsorted). A hidden ``.building-*`` one holds a manifest
    too, but it is a backfill still being made, renamed into place in a moment: never one to read."""
    try:
        return [p for p in root.iterdir() if not p.name.startswith(".") and (p / MANIFEST).is_file()]
    except OSError:
        return []


def remove_stale_builds(root: Path) -> None:
    """Remove backfill directories whose builder was killed before renaming them into place (see ``create``)."""
    try:
        names = [entry.name for entry in os.scandir(root) if entry.name.startswith(BUILD_PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(BUILD_PREFIX) :].split(".")[0]
        if not (pid.isascii() and pid.isdecimal()):
            continue
        try:
            os.kill(int(pid), 0)
            continue  # its builder lives (or belongs to another user)
        except ProcessLookupError:
            shutil.rmtree(root / name, ignore_errors=True)
        except OSError:
            continue


def _shown(root: Path) -> str:
    """A state directory in a message: quoted, and cut at 120 characters (a path can be thousands long)."""
    return repr(str(root)[:120])


_ISSUED: set[str] = set()  # every ID this process made: 6 random hex digits do repeat, once in a while


def new_backfill_id() -> str:
    """Sortable by creation time, unique: ``20261129-094512-3fa2c1`` (never one this process made already; another
    process's same ID is refused when the backfill is saved, since its directory exists)."""
    while True:
        candidate = time.strftime("%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(3)
        if candidate not in _ISSUED:
            _ISSUED.add(candidate)
            return candidate


def add_to_gitignore(repository: Path, root: Path) -> None:
    """Add the state root's path to the repository's .gitignore once (only when the root is inside it)."""
    try:
        relative = root.resolve().relative_to(repository.resolve())
    except ValueError:
        return
    entry = "/" + relative.as_posix() + "/"
    gitignore = repository / ".gitignore"
    existing = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    wanted = relative.as_posix()
    for line in existing.splitlines():
        # A comment or a negation never equals a path, so no line needs telling apart before comparing.
        pattern = line.strip().strip("/")
        if pattern and (wanted == pattern or wanted.startswith(pattern + "/")):
            return  # already ignored, by this path or a parent directory
    prefix = "" if not existing or existing.endswith("\n") else "\n"
    with open(gitignore, "a", encoding="utf-8") as handle:
        handle.write(f"{prefix}# backfill state (manifests, partition records, child logs)\n{entry}\n")


@dataclass(frozen=True)
class Generation:
    number: int
    pid: int
    pid_started: float
    host: str
    started_at: str
    # The Dask scheduler this executor sends attempts to, and its children's grace: what its successor reaches
    # to stop children it left on a cluster, whatever its records managed to say before it died.
    cluster: str | None = None
    cluster_grace: float = 0.0
    # How many partitions this generation's executor runs and when it began running them (seconds since the
    # epoch), once it knows: a screen in another process measures progress and the ETA from these, as the
    # executor's own screen does.
    selected: int | None = None
    run_started_at: float | None = None
    # --max-parallel as asked and the children it runs at once, as it started and after each live change: what
    # a screen in another process shows in its header.
    parallel: tuple[int, int] | None = None


class StateStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.partitions = directory / "partitions"
        self.children = directory / "children"
        self.splits = directory / SPLITS  # the records of split partitions' halves (engine/store/split_tree.py)
        self.lock_path = directory / ".lock"
        self.children_lock_path = directory / ".children.lock"
        self.generation_path = directory / ".generation.json"
        self._bulk_cache: tuple[int, list[BulkMark]] | None = None
        self._bulk_ids: tuple[list[BulkMark], dict[str, int]] | None = None
        self._index: RecordIndex | None = None
        self._index_opened = False

    @property
    def id(self) -> str:
        return self.directory.name

    # ---------------------------------------------------------------- creation and manifest

    def create(self, manifest: dict[str, Any]) -> None:
        """Make the backfill's directory with its manifest, or nothing at all: a directory without a
        manifest would be a backfill no command can read. It is built under a hidden name and renamed into
        place, so a stop at any moment (Ctrl+C, SIGKILL) leaves either the whole backfill or no backfill."""
        root = self.directory.parent
        check_state_root(root)
        remove_stale_builds(root)
        try:
            building = Path(tempfile.mkdtemp(prefix=f"{BUILD_PREFIX}{os.getpid()}.", dir=root))
        except OSError as error:  # nothing exists yet: the state directory is unusable (/proc, read-only, ...)
            raise BadInput(
                f"state directory {_shown(root)} cannot hold backfills ({error.strerror}): give a writable one"
            ) from None
        try:
            os.chmod(building, DIRECTORY_MODE)
            for sub in (self.partitions.name, self.children.name):
                os.mkdir(building / sub, DIRECTORY_MODE)
                os.chmod(building / sub, DIRECTORY_MODE)
            write_atomic(building / MANIFEST, orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")
            if self.directory.exists():
                raise FileExistsError(errno.EEXIST, "a backfill with this ID exists")
            os.rename(building, self.directory)
            sync_directory(root)
        except OSError as error:
            shutil.rmtree(building, ignore_errors=True)
            raise StateWriteFailed(
                f"cannot save backfill {self.id} under {self.directory.parent} ({error.strerror or error}): "
                "nothing was started"
            ) from None
        except BaseException:  # Ctrl+C while building: leave nothing behind
            shutil.rmtree(building, ignore_errors=True)
            raise

    def read_manifest(self) -> dict[str, Any]:
        path = self.directory / MANIFEST
        try:
            data = orjson.loads(path.read_bytes())
        except FileNotFoundError:
            raise StateUnreadable(f"{path} is missing: {self.directory} is not a backfill") from None
        except OSError as error:
            raise StateUnreadable(f"manifest {path} cannot be read ({error.strerror})") from None
        except orjson.JSONDecodeError as error:
            raise StateUnreadable(f"manifest {path} is not valid JSON ({error})") from None
        if not isinstance(data, dict) or data.get("format") != 1:
            raise StateUnreadable(f"manifest {path} has an unknown format: it was not written by this backfill")
        return data

    # ---------------------------------------------------------------- partition records

    def record_path(self, partition_id: str) -> Path:
        return self.partitions / f"{partition_id}.json"

    def half_path(self, half_id: str) -> Path:
        return half_path(self.splits, half_id)

    def write_record(self, record: PartitionRecord, *, durable: bool) -> None:
        """Under the backfill's lock: the record, and its row in the index (pending while the file changes); a
        half's record (splits/) has no row."""
        if record.parent is not None:
            write_atomic(self.half_path(record.id), record.to_bytes(), durable=durable)
            return
        index = self.index_for_writing()
        if index is not None:
            index.pending(record.index)
        write_atomic(self.record_path(record.id), record.to_bytes(), durable=durable)
        if index is not None:
            index.written(*index_row(record))

    # ---------------------------------------------------------------- the record index (partitions.idx)

    def index_for_writing(self, plan: Plan | None = None, id_of=None) -> RecordIndex | None:
        """Under the backfill's lock, before its first record is written: the index, checked against the files and
        rebuilt from them when it cannot be trusted, its pending rows read again. None when it cannot be kept:
        the records are written all the same, and readers read them."""
        if not self._index_opened:
            self._index_opened = True
            try:
                if plan is None:
                    from engine.store.manifest import spec_of

                    spec = spec_of(self.read_manifest())
                    plan, id_of = spec.plan, spec.ids.of
                self._index = self._open_index(plan, id_of)
            except Exception:  # the index never costs a record: without it, readers read the files
                with contextlib.suppress(OSError):
                    os.unlink(self.directory / INDEX)
                remove_reason_logs(self.directory)
                self._index = None
        return self._index if self._index is not None and self._index.usable else None

    def _open_index(self, plan: Plan, id_of) -> RecordIndex:
        size = len(plan)
        indexed = read_indexed(self.directory, self.partitions, size, writer_alive=False)
        if indexed is not None:
            try:
                index = RecordIndex(self.directory, self.partitions)
            except ReasonsMismatch:  # its reason files are gone or another index's: rebuilt with it
                indexed = None
        if indexed is None:
            remove_stale_temporaries(self.partitions)  # a settled index, once stamped, spares takeovers this listing
            stamp = stamp_of(self.partitions)  # before the files: a write while they are read leaves it stale
            rows, reasons = {}, {}
            for path in self.record_files():
                record = read_record(path, plan, id_of)
                rows[record.index] = row_of(record)
                reason = reason_of(record)
                if reason is not None:
                    reasons[record.index] = reason
            write_index(self.directory, size, rows, stamp, reasons)
            return RecordIndex(self.directory, self.partitions)
        for number in indexed.to_read:
            record = self.record_of(number, plan, id_of)
            if record is None:
                index.forget(number)
            else:
                index.written(*index_row(record))
        return index

    def index_columns(self, size: int, wanted: tuple[tuple[int, int], ...]) -> Columns | None:
        """Columns of the index when it can be trusted (``record_index.trusted_columns``)."""
        return trusted_columns(self.directory, self.partitions, size, wanted, writer_alive=self._writer_alive())

    def partitions_settled(self, size: int) -> bool:
        """Whether every record write went through the index to its end (see ``record_index.settled``)."""
        return settled(self.directory, self.partitions, size)

    def close_index(self) -> None:
        if self._index is not None:
            self._index.close()
        self._index, self._index_opened = None, False

    def record_of(self, number: int, plan: Plan, id_of) -> PartitionRecord | None:
        """The record file of partition ``number`` as it is (no bulk mark merged), None when it has none."""
        interval = plan.interval(number)
        path = self.record_path(id_of(interval.start, interval.end))
        try:
            return read_record(path, plan, id_of)
        except StateUnreadable:
            if not path.exists():
                return None
            raise

    def _writer_alive(self) -> bool:
        """Whether the index's writer is this store or a live executor holding the backfill's lock."""
        return (self._index is not None and self._index.usable) or self.lock_held_elsewhere()

    def lock_held_elsewhere(self) -> bool:
        """Whether another process (an executor, a command applying a request) holds the backfill's lock now."""
        return self.lock_path.exists() and FileLock(self.lock_path).is_held_elsewhere()

    def read_record(self, partition_id: str, plan: Plan, id_of) -> PartitionRecord | None:
        """The partition's record with any bulk mark it has not folded in yet (None: never attempted)."""
        path = self.record_path(partition_id)
        marks = self.bulk_marks()
        if not path.exists():
            if not marks:
                return None
            index = self._marked_ids(plan, id_of).get(partition_id)
            if index is None:
                return None
            interval = plan.interval(index)
            record = PartitionRecord.fresh(partition_id, interval, InstantFormatter(plan.zone), RecordStatus.QUEUED)
            merged = merge(record, marks, self.id)
            return merged if merged.attempts else None
        return merge(read_record(path, plan, id_of), marks, self.id)

    def _marked_ids(self, plan: Plan, id_of) -> dict[str, int]:
        """Partition ID → index of every partition a bulk mark names (computed once per set of marks)."""
        marks = self.bulk_marks()
        if self._bulk_ids is None or self._bulk_ids[0] is not marks:
            ids = {}
            for mark in marks:
                for index in mark.numbers:
                    interval = plan.interval(index)
                    ids[id_of(interval.start, interval.end)] = index
            self._bulk_ids = (marks, ids)
        return self._bulk_ids[1]

    def settle_running(
        self,
        record: PartitionRecord,
        board: StatusBoard,
        *,
        attempt_status: str,
        status: Status,
        error: str,
        started: frozenset[str] = frozenset(),
        starting: str | None = None,
    ) -> None:
        """An owner that is gone left ``record`` running: its running attempts end as ``attempt_status`` with
        ``error``, the partition as ``status``, written durably and shown on ``board``. An attempt it recorded as
        ``starting`` ends so too when its child was found alive (its run ID in ``started``); otherwise whether
        that child ever ran is unknown, and the attempt is ``lost``, saying so (``starting``, or ``error`` and that)."""
        finished_at = now_text()
        nodes = list(read_tree(self.splits, record).nodes()) if record.is_split else []
        for leaf in [node.record for node in nodes if not node.halves] or [record]:
            if nodes and leaf.status != RecordStatus.RUNNING:
                continue  # a half that ended, or never started
            for attempt in leaf.attempts:
                if attempt.status == RecordStatus.STARTING and attempt.run_id not in started:
                    attempt.status, attempt.finished_at = RecordStatus.LOST, finished_at
                    attempt.error = starting or f"{error} while starting it: whether its child ran is unknown"
                elif attempt.status in LIVE_ATTEMPT_STATUSES:
                    attempt.status, attempt.finished_at, attempt.error = attempt_status, finished_at, error
            leaf.status = status.label
            if leaf is not record:
                self.write_record(leaf, durable=True)
        for node in reversed(nodes):  # a split node is what its leaves add up to, the partition last
            if node.halves:
                settle_node(node)
                if node.record is not record:
                    self.write_record(node.record, durable=True)
        self.write_record(record, durable=True)
        board.set(record.index, Status.parse(record.status))

    def tree_records(self, record: PartitionRecord) -> list[PartitionRecord]:
        """``record`` and, when it split, the records of all its halves (whose children a takeover looks for)."""
        return [node.record for node in read_tree(self.splits, record).nodes()] if record.is_split else [record]

    def bulk_marks(self) -> list[BulkMark]:
        """The backfill's bulk marks, read again only when their folder changed."""
        folder = self.directory / BULK_MARKS
        try:
            stamp = os.stat(folder).st_mtime_ns
        except FileNotFoundError:
            return []
        if self._bulk_cache is None or self._bulk_cache[0] != stamp:
            self._bulk_cache = (stamp, read_bulk_marks(self.directory))
        return self._bulk_cache[1]

    def add_bulk_mark(self, mark: BulkMark, statuses: dict[int, Status]) -> None:
        """Under the backfill's lock: save ``mark``, its partitions' index rows pending while its file goes in, then
        their rows as the mark makes them (``statuses``: each partition's status after it), so that the index stays
        trusted and its rows and reasons say what the records with the mark merged say."""
        index = self.index_for_writing()
        numbers = sorted(mark.numbers)
        if index is not None:
            index.pending_many(numbers)
        write_bulk_mark(self.directory, mark)
        if index is not None:
            index.written_many({n: mark_row(statuses[n], mark.numbers[n], mark.at) for n in numbers}, mark.message)

    def apply_bulk_marks(self, board: StatusBoard) -> None:
        """Show on ``board`` every bulk mark the records have not folded in (after reading the records)."""
        for mark in self.bulk_marks():
            status = Status.parse(mark.to)
            for index, number in mark.numbers.items():
                if board.attempts(index) < number:
                    if mark.asset is None:
                        board.set(index, status)
                    board.set_attempts(index, number)
                    board.set_duration(index, 0.0)
                    board.set_verification(index, None)

    def record_files(self) -> Iterator[Path]:
        """Every partition file (temporary files of interrupted writes are ignored)."""
        try:
            entries = os.scandir(self.partitions)
        except FileNotFoundError:
            return
        with entries:
            for entry in entries:
                if entry.name.endswith(".json") and not entry.name.startswith("."):
                    yield Path(entry.path)

    def load_board(
        self, plan: Plan, id_of, visit: Callable[[PartitionRecord], None] | None = None
    ) -> tuple[StatusBoard, list[PartitionRecord]]:
        """Statuses and attempt counts of every partition, plus the records still marked running; ``visit``
        sees every record as it is read (a watcher learns what it needs in the same single pass)."""
        if not self.partitions.is_dir():
            raise StateUnreadable(
                f"{self.partitions} is missing: the records of backfill {self.id} are gone, so which partitions "
                "ran is unknown; restore the directory, or start a new backfill"
            )
        if visit is None:
            indexed = read_indexed(self.directory, self.partitions, len(plan), writer_alive=self._writer_alive())
            if indexed is not None:
                return self.board_from_index(indexed, plan, id_of)
        running: list[PartitionRecord] = []
        board = StatusBoard(len(plan))
        for path in self.record_files():
            record = read_record(path, plan, id_of)
            if show_record(board, record) is Status.RUNNING:
                running.append(record)
            if visit is not None:
                visit(record)
        self.apply_bulk_marks(board)
        return board, running

    def board_from_index(self, indexed: IndexedBoard, plan: Plan, id_of) -> tuple[StatusBoard, list[PartitionRecord]]:
        """A trusted index's board with the records of its pending and running rows read (a pending row without
        a file reads as never attempted), and the bulk marks merged; plus the records still marked running."""
        board, running = indexed.board, []
        for number in indexed.to_read:
            record = self.record_of(number, plan, id_of)
            if record is not None and show_record(board, record) is Status.RUNNING:
                running.append(record)
        self.apply_bulk_marks(board)
        return board, running

    # ---------------------------------------------------------------- children and generations

    def log_path(self, run_id: str) -> Path:
        return self.children / f"{run_id}.log"

    def read_generation(self) -> Generation | None:
        """The last executor's generation, None before the first; a garbled file is an error, never a reset
        (generations order attempts and fence stale executors)."""
        try:
            data = orjson.loads(self.generation_path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, orjson.JSONDecodeError) as error:
            raise StateUnreadable(
                f"{self.generation_path} cannot be read ({error}): it was not written by backfill"
            ) from None
        try:
            generation = Generation(
                data["generation"],
                data["pid"],
                data["pid_started"],
                data["host"],
                data["started_at"],
                data.get("cluster"),
                float(data.get("cluster_grace", 0.0)),
                _count_or_none(data.get("selected")),
                _seconds_or_none(data.get("run_started_at")),
                _parallel_or_none(data.get("max_parallel"), data.get("parallel")),
            )
        except (KeyError, TypeError) as error:
            raise StateUnreadable(f"{self.generation_path} lacks {error}: it was not written by backfill") from None
        if not isinstance(generation.number, int) or isinstance(generation.number, bool) or generation.number < 1:
            raise StateUnreadable(
                f"{self.generation_path} has generation {generation.number!r}, not a whole number of 1 or more"
            )
        return generation

    def write_generation(self, number: int, pid: int, pid_started: float, started_at: str) -> Generation:
        generation = Generation(number, pid, pid_started, socket.gethostname(), started_at)
        self._write_generation(generation)
        return generation

    def record_cluster(self, generation: Generation, address: str, grace: float) -> Generation:
        """Before its first launch on a Dask cluster: which scheduler this generation's children run under."""
        generation = replace(generation, cluster=address, cluster_grace=grace)
        self._write_generation(generation)
        return generation

    def record_selection(
        self, generation: Generation, selected: int, started_at: float, parallel: tuple[int, int]
    ) -> Generation:
        """Once the executor has counted its selection and starts: what a screen in another process measures its
        progress against, and how many children it runs at once."""
        generation = replace(generation, selected=selected, run_started_at=started_at, parallel=parallel)
        self._write_generation(generation)
        return generation

    def record_parallel(self, generation: Generation, parallel: tuple[int, int]) -> Generation:
        """An operator changed --max-parallel while it runs: (asked, at once) for the screens of other processes."""
        generation = replace(generation, parallel=parallel)
        self._write_generation(generation)
        return generation

    def _write_generation(self, generation: Generation) -> None:
        data: dict[str, Any] = {
            "generation": generation.number,
            "pid": generation.pid,
            "pid_started": generation.pid_started,
            "host": generation.host,
            "started_at": generation.started_at,
        }
        if generation.cluster is not None:
            data.update(cluster=generation.cluster, cluster_grace=generation.cluster_grace)
        if generation.selected is not None:
            data.update(selected=generation.selected, run_started_at=generation.run_started_at)
        if generation.parallel is not None:
            data.update(max_parallel=generation.parallel[0], parallel=generation.parallel[1])
        write_atomic(self.generation_path, orjson.dumps(data))


def show_record(board: StatusBoard, record: PartitionRecord) -> Status:
    """Put what ``record`` says on ``board``; its status."""
    status = status_of(record)
    board.set(record.index, status)
    board.set_attempts(record.index, len(record.attempts))
    if record.attempts:
        board.set_duration(record.index, record.attempts[-1].duration)
        board.set_verification(record.index, record.attempts[-1].verification)
    return status


def _parallel_or_none(asked: Any, running: Any) -> tuple[int, int] | None:
    """(asked, at once) when both are counts of 1 or more (older generations hold neither), else unknown."""
    if _count_or_none(asked) and _count_or_none(running):
        return asked, running
    return None


def _count_or_none(value: Any) -> int | None:
    """A count as an older or damaged generation may hold it: a whole number of 0 or more, else unknown."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _seconds_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None
