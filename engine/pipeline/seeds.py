"""Seeds, as Bruin loads them: a CSV, Parquet, JSON, JSONL/NDJSON or Avro file beside the asset, or an http(s)
URL, replaces the seed's table, typed by its declared columns unless ``enforce_schema: false``.

DuckDB reads every format itself; Avro and URLs need its ``avro`` and ``httpfs`` extensions. Whether they
are there is asked before anything runs (``missing_extension``), so a pipeline whose seed cannot be read
fails validation with one line instead of failing its first partition.
"""

from __future__ import annotations

from typing import Any

from engine.pipeline.assets import Asset
from engine.pipeline.database import Database, ensure_schema, quote_identifier, quote_name, run_in_transaction

READERS = {
    "csv": "read_csv(?, header = true, auto_detect = true)",
    "parquet": "read_parquet(?)",
    "json": "read_json(?, format = 'auto')",
    "jsonl": "read_json(?, format = 'newline_delimited')",
    "avro": "read_avro(?)",
}


def needed_extensions(asset: Asset) -> list[str]:
    """The DuckDB extensions reading this seed needs beyond those DuckDB carries built in."""
    return (["avro"] if asset.seed_format == "avro" else []) + (["httpfs"] if asset.seed_url else [])


def missing_extension(asset: Asset) -> str | None:
    """Why this seed cannot be read here (an extension neither loaded nor installed), or None."""
    needed = needed_extensions(asset)
    if not needed:
        return None
    import duckdb

    with duckdb.connect() as probe:  # in memory: what this DuckDB has installed, asked without the network
        present = {
            name
            for name, installed, loaded in probe.execute(
                "SELECT extension_name, installed, loaded FROM duckdb_extensions()"
            ).fetchall()
            if installed or loaded
        }
    for name in needed:
        if name not in present:
            what = "an http(s) seed" if name == "httpfs" else "an Avro seed"
            return (
                f"{what} needs DuckDB's {name} extension, which is not installed here: run INSTALL {name} "
                f"in DuckDB {duckdb.__version__} where the network allows"
                + (", or download the file and give its path" if name == "httpfs" else ", or convert it to Parquet")
            )
    return None


def seed_source(asset: Asset, context: dict[str, Any]) -> str:
    """What the seed reads this run: its URL or file, a templated path rendered with the run's variables
    (a bad template or a rendered path that is not a file fails the asset, naming both)."""
    if asset.seed_template is None:
        return asset.seed_url or str(asset.seed_path)
    from engine.pipeline.templating import TemplateProblem, render

    try:
        rendered = render(asset.seed_template, context).strip()
    except TemplateProblem as error:
        raise ValueError(f"parameters.path {asset.seed_template!r}: {error}") from None
    if rendered.lower().startswith(("http://", "https://")):
        return rendered
    path = (asset.path.parent / rendered).resolve()
    if not path.is_file():
        raise ValueError(f"seed file {rendered!r} (parameters.path {asset.seed_template!r}) does not exist")
    return str(path)


def seed_query(asset: Asset, source: str) -> tuple[str, list[Any]]:
    """The SELECT that reads the seed's rows from ``source`` (as ``seed_source`` found it), and its parameters:
    what its run loads, and what the pre-flight counts."""
    declared = {c.name: c.type for c in asset.columns if c.type} if asset.seed_types else {}
    parameters: list[Any] = [source]
    if asset.seed_format == "csv" and declared:
        reader = READERS["csv"].replace(")", ", types = ?)")
        parameters.append(declared)
        select = "*"
    else:
        reader = READERS[asset.seed_format]
        # Other formats carry their own types: declared ones are applied as casts (a missing column fails).
        casts = ", ".join(f"CAST({quote_identifier(n)} AS {t}) AS {quote_identifier(n)}" for n, t in declared.items())
        select = f"* REPLACE ({casts})" if casts else "*"
    return f"SELECT {select} FROM {reader}", parameters


def load_seed(db: Database, asset: Asset, source: str | None = None) -> int:
    """Replace the seed's table with the file's rows (``source``: as ``seed_source`` found it); the rows."""
    target = quote_name(asset.name)
    query, parameters = seed_query(asset, source or asset.seed_url or str(asset.seed_path))
    ensure_schema(db, asset.name)
    return run_in_transaction(db, lambda: db.count(f"CREATE OR REPLACE TABLE {target} AS {query}", parameters))
