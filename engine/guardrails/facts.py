"""Everything the pre-flight checks judge, gathered once: the pipeline and its assets, the history, the
warehouse as it is now, the other backfills of the repository.

Gathering never raises for what it finds: a question it could not answer is kept
in ``errors`` under the check that needed it, and that check becomes human-only.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.base.errors import BackfillError
from engine.dates.plan import Interval
from engine.guardrails.history import (
    EarlierBackfill,
    History,
    command_history,
    earlier_backfills,
    marked_runs,
    read_run_history,
)
from engine.guardrails.request import GuardRequest
from engine.guardrails.settings import GuardrailSettings, settings_for_command, settings_of_environment
from engine.guardrails.tiers import LEVELS
from engine.guardrails.warehouses import Warehouses
from engine.spec.command_code import named_files
from engine.store.live_work import LiveWork, WorkKind, command_key, pipeline_key, read_live, real_files, this_process

if TYPE_CHECKING:  # a command's pre-flight never loads a pipeline: jinja2 and yaml stay unimported (startup time)
    from engine.guardrails.warehouse import Held, Warehouse
    from engine.pipeline.assets import Asset
    from engine.pipeline.config import Config, Connection, Environment
    from engine.pipeline.loading import Pipeline
    from engine.pipeline.sql_writes import Classified
    from engine.pipeline.templating import Window


@dataclass(kw_only=True)
class AssetFacts:
    asset: Asset
    selected: bool
    strategy: str
    uses_interval: bool
    layer: str
    layer_source: str
    connection: Connection | None
    table_rows: int | None = None  # None: no table (yet)
    rows_in_range: int | None = None
    sample_rows: int | None = None
    sample_error: str | None = None
    # time_interval and delete+insert: the sample's rows whose key lies outside the first partition's window
    # (the strategy deletes only the window, so each partition would add these again).
    sample_outside: int | None = None
    # append: the sample's rows already in the table, matched on every column (INTERSECT ALL), whatever the
    # key says (a load-date key hides duplicates from a count by window).
    sample_existing: int | None = None
    # the table's rows the first partition's run deletes before it inserts its query's: those in its window
    # (time_interval), those of the keys the query returns (delete+insert), the whole table (a rebuild); None when
    # it deletes none, or there is no table or sample
    replaced_rows: int | None = None
    # append, truncate+insert, delete+insert, time_interval: the table's columns the sample does not return (the
    # run refuses to insert rows without them rather than write NULL there)
    sample_missing: list[str] = field(default_factory=list)
    # merge with a primary key: the sample's rows sharing their key with another of its rows
    sample_repeated_keys: int | None = None
    past_rows: list[int] = field(default_factory=list)  # rows past succeeded runs wrote, per partition length
    # the SQL its run executes as written, by where it comes from (RUN_SQL_PHASES: the pre and post hooks, and the
    # query of an SQL asset without materialization) as the first partition's run renders it (macros and variables
    # included), each as written where it cannot be rendered here: judged from what it runs, not from its text.
    run_sql: dict[str, list[str]] = field(default_factory=dict)
    # a materialized SQL asset's first partition's query as its run renders it (trailing semicolons and comments
    # dropped), with the window it is meant to write; None when it is not rendered (not one, or it failed: then
    # render_error says why)
    rendered: tuple[str, Window] | None = None
    render_error: str | None = None
    # the statements after that query (a materialized asset runs one; the run refuses more)
    after_query: list[str] = field(default_factory=list)
    # what that query writes inside itself ("DELETE on raw.landing": a CTE's DELETE … RETURNING; the run refuses it)
    query_writes: list[str] = field(default_factory=list)

    @functools.cached_property
    def classified(self) -> dict[str, list[Classified]]:
        """``run_sql`` classified once, for every check that reads it (the materialization's findings, the tables
        a snapshot copies, the shapes carried to the partitions)."""
        from engine.pipeline.sql_writes import classify

        return {phase: [classify(text) for text in texts] for phase, texts in self.run_sql.items()}

    @property
    def changes_data(self) -> bool:
        """Whether running it writes rows the backfill can be asked to undo (not on a read-only connection)."""
        from engine.guardrails.asset_risk import changes_data

        read_only = self.connection is not None and self.connection.read_only
        return changes_data(self.asset) and not read_only


@dataclass
class Facts:
    request: GuardRequest
    settings: GuardrailSettings
    span: tuple[int, int]  # the selected partitions' extent, [start, end)
    first: Interval | None  # the first selected partition (the row-count sample)
    pipeline: Pipeline | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    assets: dict[str, AssetFacts] = field(default_factory=dict)  # selected and affected downstream
    history: History = field(default_factory=History)
    backfills: list[EarlierBackfill] = field(default_factory=list)
    held: list[Held] = field(default_factory=list)
    live: list[LiveWork] = field(default_factory=list)  # work running now on this machine (engine.store.live_work)
    database_bytes: dict[str, int] = field(default_factory=dict)  # file → size
    errors: dict[str, str] = field(default_factory=dict)  # check name → why it could not be decided
    warehouses: Warehouses = field(default_factory=Warehouses, repr=False)  # read-only, one per file
    code: list[Path] = field(default_factory=list)  # a command's: the code its templates name (command_files)

    @property
    def selected(self) -> list[AssetFacts]:
        return [a for a in self.assets.values() if a.selected]

    @property
    def downstream(self) -> list[AssetFacts]:
        return [a for a in self.assets.values() if not a.selected]

    def by_file(self, assets: list[AssetFacts]) -> dict[Path, list[AssetFacts]]:
        """``assets`` grouped by the DuckDB file they live in (those on other connections left out)."""
        grouped: dict[Path, list[AssetFacts]] = {}
        for asset_facts in assets:
            connection = asset_facts.connection
            if connection is not None and connection.kind == "duckdb" and connection.path is not None:
                grouped.setdefault(connection.path, []).append(asset_facts)
        return grouped

    @property
    def is_command(self) -> bool:
        return self.request.spec.target.is_command

    def live_work(self, backfill_id: str | None = None) -> LiveWork:
        """What this invocation will run, as the live-work registry keeps it: the selected assets and their
        downstream, their DuckDB files by real path, and the selected partitions' extent."""
        request = self.request
        spec = request.spec
        backfill_id = backfill_id or request.backfill_id
        common = {"backfill_id": backfill_id, "state_dir": str(request.state_root), "windows": (self.span,)}
        if self.is_command:
            key = command_key(spec.target.identity, str(request.working_directory))
            return this_process(kind=WorkKind.BACKFILL, target=key, shown=spec.target.name, **common)
        assert self.pipeline is not None
        return this_process(
            kind=WorkKind.BACKFILL,
            target=pipeline_key(self.pipeline.directory),
            shown=self.pipeline.name,
            assets=tuple(sorted(a.asset.name for a in self.selected)),
            downstream=tuple(sorted(a.asset.name for a in self.downstream)),
            files=real_files(self.by_file(self.selected)),
            **common,
        )

    def range_window(self) -> Window:
        from engine.guardrails.warehouse import whole_range_window  # a pipeline's: a command has no window

        return whole_range_window(self.span[0], self.span[1], self.request.spec.zone)

    def effective_window(self, asset: Asset, window: Window) -> Window:
        """``window`` as the asset's runs see it, after its interval modifiers (or the pipeline's), which may
        reach before the range or after it. Modifiers shift each end on its own, so the range's effective
        window is the first run's start and the last run's end."""
        if not self.request.spec.run_options.apply_interval_modifiers or self.pipeline is None:
            return window
        modifiers = asset.interval_modifiers or self.pipeline.default_interval_modifiers
        if not modifiers:
            return window
        from engine.pipeline.interval_modifiers import apply_modifiers
        from engine.pipeline.templating import base_context

        context = base_context(
            window, run_id="preflight", pipeline=self.pipeline.name, variables=self.variables, full_refresh=False
        )
        return apply_modifiers(window, modifiers, context)


def command_files(request: GuardRequest) -> list[Path]:
    """The code a command backfill's partitions run besides its templates: what ``--command`` and
    ``--verify-command`` name (a verification script replaced by one that exits 0 would pass every partition)."""
    directory = request.working_directory
    templates = (request.spec.target.template, request.guard.verify_command)
    return [path for template in templates if template for path in named_files(template, directory)]


def gather(request: GuardRequest) -> Facts:
    spec = request.spec
    plan = spec.plan
    bounds = request.bounds or _first_and_last(request)
    if bounds is None:
        span, first = (spec.start, spec.start), None
    else:
        first = plan.interval(bounds[0])
        span = (first.start, plan.interval(bounds[1]).end)
    if spec.target.is_command:
        settings = request.settings_override or settings_for_command(request.guard.level)
        facts = Facts(request, settings, span, first)
        facts.backfills = earlier_backfills(request.state_root, exclude=request.backfill_id)
        facts.history = command_history(facts.backfills, spec.target.identity)
        facts.live = read_live()
        facts.code = command_files(request)
        return facts
    assert request.config is not None and request.environment is not None
    environment = request.environment
    settings = settings_of_environment(
        environment.name, request.config.raw_environments.get(environment.name), request.config.path
    )
    settings = strictest_on_the_same_files(settings, request.config, environment)
    facts = Facts(request, settings, span, first)
    _gather_pipeline(facts)
    facts.settings = strictest_on_attached_files(facts)
    facts.live = read_live()
    return facts


def strictest_on_the_same_files(
    settings: GuardrailSettings, config: Config, environment: Environment
) -> GuardrailSettings:
    """The level follows the warehouse: the strictest level of any environment whose DuckDB connections
    point at one of this environment's files (by real path) applies, so a ``sandbox`` environment cannot open
    ``production``'s file without production's rules. An environment that cannot be read (an unset
    ``${VAR}``) points nowhere known and is passed over."""
    ours = _duckdb_files(environment)
    if not ours:
        return settings
    for name, files, theirs in _environments(config):
        if name != environment.name and (shared := ours & files):
            settings = _stricter(settings, theirs, f"environment {name!r} uses the same DuckDB file {min(shared)}")
    return settings


def strictest_on_attached_files(facts: Facts) -> GuardrailSettings:
    """The level follows every warehouse the run writes to: an ``ATTACH`` in a selected asset's hooks or SQL run as
    written opens another DuckDB file in its run, and the statements after it may write there (a ``sandbox``
    environment's hook deleted ``production``'s mart, verdict auto, exit 0), and a ``COPY … TO`` overwrites a file
    or empties a directory (one aimed at ``production``'s file replaced it with CSV text, verdict auto, exit 0). The
    strictest level of any environment that owns a file attached or overwritten applies; a statement whose text does
    not name its file may reach any of them."""
    from engine.pipeline.sql_writes import UNKNOWN_FILE, attached_file, copied_to

    settings, request = facts.settings, facts.request
    attached: dict[str, str] = {}  # the file as written → the first asset that attaches it
    copied: dict[str, str] = {}  # the file or directory a COPY writes, as written → the first asset that does
    for asset_facts in facts.selected:
        for classified in asset_facts.classified.values():
            for statement in (s for c in classified for s in c.unclassified):
                if (file := attached_file(statement)) is not None:
                    attached.setdefault(file, asset_facts.asset.name)
                elif (file := copied_to(statement)) is not None:
                    copied.setdefault(file, asset_facts.asset.name)
    if not (attached or copied) or request.config is None:
        return settings
    for name, files, theirs in _environments(request.config):
        for file, asset in sorted(attached.items()):
            if file == UNKNOWN_FILE:
                why = f"{asset}'s SQL attaches a database its text does not name, which may be environment {name!r}'s"
            elif (path := _attached_path(file, request.working_directory)) in files:
                why = f"{asset}'s SQL attaches {path}, environment {name!r}'s DuckDB file"
            else:
                continue
            settings = _stricter(settings, theirs, why)
        for file, asset in sorted(copied.items()):
            if file == UNKNOWN_FILE:
                why = f"{asset}'s SQL copies to a file its text does not name, which may be environment {name!r}'s"
            elif reached := _copy_reaches(_attached_path(file, request.working_directory), files):
                why = f"{asset}'s SQL copies to {reached} of environment {name!r}"
            else:
                continue
            settings = _stricter(settings, theirs, why)
    return settings


def _copy_reaches(path: Path, files: set[Path]) -> str | None:
    """What of an environment's DuckDB ``files`` a COPY to ``path`` overwrites: the file, its write-ahead log, or
    (a directory, which ``OVERWRITE`` empties first) a directory holding it."""
    for file in sorted(files):
        if path == file:
            return f"{path}, the DuckDB file"
        if path == file.with_name(file.name + ".wal"):
            return f"{path}, the write-ahead log of the DuckDB file"
        if file.is_relative_to(path):
            return f"{path}, a directory holding the DuckDB file {file}"
    return None


def _attached_path(file: str, working_directory: Path) -> Path:
    """Where DuckDB opens an attached file: ``~`` expanded, relative to the run's working directory."""
    return (working_directory / Path(file).expanduser()).resolve()


def _environments(config: Config) -> Iterator[tuple[str, set[Path], GuardrailSettings]]:
    """Each environment of ``.bruin.yml`` that can be read: its name, its DuckDB files (by real path) and its
    guardrail settings. One that cannot (an unset ``${VAR}``, a bad key) points nowhere known and is passed over."""
    for name in config.environment_names:
        try:
            files = _duckdb_files(config.environment(name))
            theirs = settings_of_environment(name, config.raw_environments.get(name), config.path)
        except BackfillError:
            continue
        yield name, files, theirs


def _stricter(settings: GuardrailSettings, theirs: GuardrailSettings, why: str) -> GuardrailSettings:
    if LEVELS.index(theirs.level) > LEVELS.index(settings.level):
        return replace(settings, level=theirs.level, level_source=why)
    return settings


def _duckdb_files(environment: Environment) -> set[Path]:
    return {c.path.resolve() for c in environment.connections if c.kind == "duckdb" and c.path is not None}


def _first_and_last(request: GuardRequest) -> tuple[int, int] | None:
    indices = request.selected()
    first = next(indices, None)
    if first is None:
        return None
    last = first
    for last in indices:  # noqa: B007 - the last one is what we want
        pass
    return first, last


def _gather_pipeline(facts: Facts) -> None:
    from engine.guardrails.asset_risk import layer_of, strategy_of, uses_interval
    from engine.pipeline.asset_status import AssetStatus
    from engine.pipeline.assets import enabled_by
    from engine.pipeline.repository import logs_root, resolve_target

    request = facts.request
    spec = request.spec
    target = resolve_target(spec.target.path or "")
    assert request.config is not None and request.environment is not None
    checked = request.checked  # validated once, at planning: judged as it will run
    assert checked is not None, "a pipeline's pre-flight is asked about the pipeline planning validated"
    pipeline = facts.pipeline = checked.pipeline
    facts.variables = checked.variables
    affected = pipeline.downstream_of(checked.selected)
    for name in sorted(checked.selected | affected):
        asset = pipeline.assets[name]
        layer, source = layer_of(asset)
        connection_name = pipeline.connection_of(asset)
        facts.assets[name] = AssetFacts(
            asset=asset,
            selected=name in checked.selected and enabled_by(asset, checked.variables),  # a disabled one does not run
            strategy=strategy_of(asset),
            uses_interval=uses_interval(asset, pipeline, checked.variables),
            layer=layer,
            layer_source=source,
            connection=request.environment.connection(connection_name) if connection_name else None,
        )
    facts.history = read_run_history(logs_root(target.repository) / "runs", pipeline.name, target.pipeline_dir)
    facts.backfills = earlier_backfills(request.state_root, exclude=request.backfill_id)
    facts.history.runs += marked_runs(facts.backfills, facts.history, target.pipeline_dir)
    length = facts.first.end - facts.first.start if facts.first is not None else None
    for name, facts_of in facts.assets.items():
        facts_of.past_rows = []
        for run in facts.history.runs:
            past = run.assets.get(name)
            rows = (
                None
                if past is None
                else past.rows_in_interval
                if past.rows_in_interval is not None
                else past.rows_written
            )
            if past is None or past.status != AssetStatus.SUCCEEDED or rows is None or past.end <= past.start:
                continue
            # Per partition: a run over a week counts as a seventh of its rows per daily partition.
            facts_of.past_rows.append(round(rows * length / (past.end - past.start)) if length else rows)
    parser = _parser_of(facts)
    for asset_facts in facts.selected:
        asset_facts.run_sql = _rendered_run_sql(facts, asset_facts.asset)
        _render_query(facts, asset_facts, parser)
    _look_into_warehouses(facts)


def _parser_of(facts: Facts) -> Any | None:
    """An open connection to parse SQL with: a selected asset's warehouse, which the look opens anyway (kept by
    ``facts.warehouses``). DuckDB's module-level parse opens an in-memory database of its own, 25 ms."""
    for path in facts.by_file(facts.selected):
        try:
            connection = facts.warehouses.open(path).connection
        except Exception:  # held or unreadable: the look says so; parse another way
            continue
        if connection is not None:
            return connection
    return None


def _render_query(facts: Facts, asset_facts: AssetFacts, parser: Any | None = None) -> None:
    """The first partition's query of a materialized SQL asset, rendered once for every sample and check."""
    from engine.pipeline.sql_writes import after_the_query, writes_inside

    asset = asset_facts.asset
    if asset.kind != "sql" or asset.materialization.type is None or facts.first is None:
        return
    try:
        asset_facts.rendered = _sample_query(facts, asset)
    except Exception as error:
        asset_facts.render_error = _first_line(error)
        return
    asset_facts.after_query = after_the_query(asset_facts.rendered[0], parser)
    if not asset_facts.after_query:
        writes = writes_inside(asset_facts.rendered[0], parser)
        asset_facts.query_writes = [f"{write.verb} on {write.table}" for write in writes]


def _look_into_warehouses(facts: Facts) -> None:
    from engine.guardrails.warehouse import Held

    for path, assets in facts.by_file(list(facts.assets.values())).items():
        try:
            warehouse = facts.warehouses.open(path)
        except Held as held:
            facts.held.append(held)
            facts.errors.setdefault("row_count_sanity", f"{held}")
            for asset_facts in assets:  # each sample says why it was not taken
                asset_facts.sample_error = str(held)
            continue
        except Exception as error:  # a file we cannot read: a question we cannot answer
            facts.errors.setdefault("size_and_duration", f"cannot open {path}: {error}")
            continue
        facts.database_bytes[str(path)] = warehouse.size_bytes
        for asset_facts in assets:
            _inspect_table(facts, warehouse, asset_facts)


def _inspect_table(facts: Facts, warehouse: Warehouse, asset_facts: AssetFacts) -> None:
    """Rows of a table (or seed) asset, those in the range, and the first partition's sample. Views are left
    alone: counting one runs its whole query (a view over a source can be costly) and it stores no rows."""
    asset = asset_facts.asset
    is_table = asset.kind == "seed" or asset.materialization.type == "table"
    if not is_table:
        return
    try:
        asset_facts.table_rows = warehouse.rows(asset.name)
        if asset_facts.table_rows is not None and asset.materialization.incremental_key:
            asset_facts.rows_in_range = warehouse.rows_in_window(
                asset, facts.effective_window(asset, facts.range_window())
            )
    except Exception as error:
        facts.errors.setdefault("materialization", f"cannot read table {asset.name}: {_first_line(error)}")
    if asset_facts.selected and asset.kind == "seed" and asset_facts.table_rows and facts.first is not None:
        _sample_seed(facts, warehouse, asset_facts)
        return
    if asset_facts.selected and asset.kind == "sql" and facts.first is not None:
        if warehouse.connection is None:
            asset_facts.sample_error = f"{warehouse.path} does not exist yet"
            return
        if asset_facts.after_query:  # the run refuses more than one query: the materialization check says so
            asset_facts.sample_error = "the query is more than one statement"
            return
        if asset_facts.rendered is None:
            asset_facts.sample_error = asset_facts.render_error or "the query was not rendered"
            return
        query, window = asset_facts.rendered
        try:
            asset_facts.sample_rows = warehouse.sample_count(query)
        except Exception as error:
            asset_facts.sample_error = _first_line(error)
            return
        strategy = asset.materialization.strategy
        try:
            asset_facts.sample_missing = warehouse.missing_columns(asset, query)
            if strategy in WINDOWED and asset.materialization.incremental_key:
                asset_facts.sample_outside = warehouse.count_outside(asset, query, window)
            if strategy == "merge" and asset.primary_key:
                asset_facts.sample_repeated_keys = warehouse.count_repeated_keys(asset, query)
            if strategy == "append" and asset_facts.table_rows:
                asset_facts.sample_existing = warehouse.count_existing(asset, query)
            if asset_facts.table_rows:
                from engine.guardrails.asset_risk import rebuilds_table

                whole = rebuilds_table(asset, asset_facts.strategy)
                asset_facts.replaced_rows = warehouse.count_replaced(asset, query, window, whole=whole)
        except Exception as error:  # undecided is never a pass: the certainty check makes it human-only
            facts.errors.setdefault("materialization", f"cannot compare {asset.name}'s sample: {_first_line(error)}")


WINDOWED = ("time_interval", "delete+insert")


def _sample_seed(facts: Facts, warehouse: Warehouse, asset_facts: AssetFacts) -> None:
    """A seed rebuilds its table from its file: the rows its first partition's run would load, counted as that run
    reads them, against the table's (a truncated CSV emptied the table with verdict auto). A seed read through an
    extension (Avro, a URL's httpfs) is not counted: this read-only look loads none."""
    from engine.pipeline.seeds import needed_extensions, seed_query, seed_source

    asset = asset_facts.asset
    if needed_extensions(asset):
        return
    try:
        query, parameters = seed_query(asset, seed_source(asset, _first_context(facts, asset)[0]))
        asset_facts.sample_rows = warehouse.sample_count(query, parameters)
    except Exception as error:  # undecided is never a pass: the certainty check makes it human-only
        facts.errors.setdefault("materialization", f"cannot count {asset.name}'s seed file: {_first_line(error)}")
        return
    asset_facts.replaced_rows = asset_facts.table_rows


def _sample_query(facts: Facts, asset: Asset) -> tuple[str, Window]:
    """The first partition's query as the run renders it, and the window it is meant to write."""
    from engine.pipeline.materialization import strip_statement
    from engine.pipeline.templating import render

    context, window = _first_context(facts, asset)
    return strip_statement(render(asset.body, context, first_line=asset.body_line)), window


def _first_context(facts: Facts, asset: Asset) -> tuple[dict[str, Any], Window]:
    """The template context of the asset's run over the first partition (its interval modifiers applied, the
    pipeline's macros in it, as asset_run builds it), and that run's window."""
    from engine.pipeline.interval_modifiers import apply_modifiers
    from engine.pipeline.templating import Window, base_context, with_macros

    assert facts.first is not None and facts.pipeline is not None
    spec = facts.request.spec
    window = Window(facts.first.start, facts.first.end - 1, spec.zone)
    context = base_context(
        window, run_id="preflight", pipeline=facts.pipeline.name, variables=facts.variables, full_refresh=False
    )
    context["this"] = asset.name
    if spec.run_options.apply_interval_modifiers:
        moved = apply_modifiers(window, asset.interval_modifiers or facts.pipeline.default_interval_modifiers, context)
        context.update(moved.variables())
        window = moved
    if facts.pipeline.macros:  # rendered as its run renders it (asset_run): macros see the moved window
        context = with_macros(facts.pipeline.macros, context)
    return context, window


def _rendered_run_sql(facts: Facts, asset: Asset) -> dict[str, list[str]]:
    """Each pre and post hook, and the query of an SQL asset run as written, as the first partition's run renders
    it; one that cannot be rendered here is kept as written (its template text then cannot be classified, which is
    human-only, never a pass)."""
    from engine.pipeline.sql_writes import QUERY
    from engine.pipeline.templating import render

    sources = dict(asset.hooks)
    if asset.kind == "sql" and asset.materialization.type is None:
        sources[QUERY] = [asset.body]
    if not any(sources.values()):
        return {}
    try:
        context = _first_context(facts, asset)[0] if facts.first is not None else None
    except Exception:  # a modifier or macro file that fails here fails the run too; judge the text as written
        context = None
    rendered: dict[str, list[str]] = {}
    for phase, texts in sources.items():
        for text in texts:
            with contextlib.suppress(Exception):  # kept as written: its template text is judged
                text = render(text, context) if context is not None else text
            rendered.setdefault(phase, []).append(text)
    return rendered


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__
