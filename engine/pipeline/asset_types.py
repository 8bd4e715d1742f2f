"""Asset types: the ones this runner runs, and every other one Bruin defines.

Bruin's types are listed as ``pkg/pipeline/pipeline.go`` declares them (its ``AssetType`` constants). An asset
of one of them that we cannot run (``bq.sql``, ``ingestr``, …) is still part of the pipeline — its name, its
dependencies, its tags — so a selection that leaves it out runs the rest, as it would in Bruin; selecting it
is an error naming it. A type Bruin does not define is an error wherever it is, as Bruin's ``valid-task-type``
lint rule makes it.
"""

from __future__ import annotations

from enum import StrEnum

SQL_TYPES = ("duckdb.sql",)
SEED_TYPES = ("duckdb.seed",)
PYTHON_TYPES = ("python",)
# Bruin runs nothing for these (pkg/executor/defaults.go: every step a NoOpOperator): they stand for tables
# that exist already, or group dependencies.
NO_OP_TYPES = ("duckdb.source", "empty")
SUPPORTED_TYPES = (*SQL_TYPES, *SEED_TYPES, *PYTHON_TYPES, *NO_OP_TYPES)

# Bruin's SQL asset types (pkg/pipeline/pipeline.go, IsSQLAssetType): the only ones hooks reach, by default too.
BRUIN_SQL_TYPES = frozenset(
    (
        "bq.sql", "sf.sql", "pg.sql", "my.sql", "rs.sql", "ms.sql", "vertica.sql", "databricks.sql", "synapse.sql",
        "fabric.sql", "fabric.spark_sql", "fw.sql", "athena.sql", "duckdb.sql", "motherduck.sql", "clickhouse.sql",
        "doris.sql", "starrocks.sql", "trino.sql", "dremio.sql", "sail.sql", "spark.sql", "oracle.sql",
    )
)  # fmt: skip

BRUIN_TYPES = frozenset(
    (
        "agent.claude_code",
        "appsflyer.export.bq",
        "athena.seed",
        "athena.sensor.query",
        "athena.sensor.table",
        "athena.source",
        "athena.sql",
        "bq.seed",
        "bq.sensor.query",
        "bq.sensor.table",
        "bq.source",
        "bq.sql",
        "clickhouse.seed",
        "clickhouse.sensor.query",
        "clickhouse.sensor.table",
        "clickhouse.source",
        "clickhouse.sql",
        "databricks.seed",
        "databricks.sensor.query",
        "databricks.sensor.table",
        "databricks.source",
        "databricks.sql",
        "dataproc_serverless.pyspark",
        "dbt",
        "dbt.test",
        "domo",
        "doris.seed",
        "doris.sensor.query",
        "doris.sensor.table",
        "doris.source",
        "doris.sql",
        "dremio.sensor.query",
        "dremio.sql",
        "duckdb.seed",
        "duckdb.sensor.query",
        "duckdb.source",
        "duckdb.sql",
        "dynamodb",
        "elasticsearch",
        "empty",
        "emr_serverless.pyspark",
        "emr_serverless.spark",
        "fabric.seed",
        "fabric.sensor.query",
        "fabric.sensor.table",
        "fabric.spark_sql",
        "fabric.sql",
        "fw.seed",
        "fw.sensor.query",
        "fw.sensor.table",
        "fw.sql",
        "gcs.sensor.object",
        "gcs.sensor.object_sensor_with_prefix",
        "gcs.sensor.prefix",
        "gooddata",
        "grafana",
        "gsheets",
        "ingestr",
        "ingestr.iceberg",
        "looker",
        "looker_studio",
        "metabase",
        "modebi",
        "mongo.source",
        "motherduck.sql",
        "ms.seed",
        "ms.sensor.query",
        "ms.sensor.table",
        "ms.source",
        "ms.sql",
        "my.seed",
        "my.sensor.query",
        "my.sensor.table",
        "my.sql",
        "oracle.source",
        "oracle.sql",
        "pg.seed",
        "pg.sensor.query",
        "pg.sensor.table",
        "pg.source",
        "pg.sql",
        "powerbi",
        "python",
        "python.beta",
        "python.legacy",
        "qliksense",
        "qlikview",
        "quicksight",
        "quicksight.dashboard",
        "quicksight.dataset",
        "r",
        "redash",
        "rs.seed",
        "rs.sensor.query",
        "rs.sensor.table",
        "rs.source",
        "rs.sql",
        "s3.sensor.key_sensor",
        "sail.sensor.query",
        "sail.sql",
        "sf.seed",
        "sf.sensor.query",
        "sf.sensor.table",
        "sf.source",
        "sf.sql",
        "sisense",
        "spark.seed",
        "spark.sensor.query",
        "spark.sensor.table",
        "spark.source",
        "spark.sql",
        "starrocks",
        "starrocks.seed",
        "starrocks.sensor.query",
        "starrocks.sensor.table",
        "starrocks.source",
        "starrocks.sql",
        "superset",
        "synapse.seed",
        "synapse.sensor.query",
        "synapse.sensor.table",
        "synapse.source",
        "synapse.sql",
        "tableau",
        "tableau.dashboard",
        "tableau.datasource",
        "tableau.workbook",
        "tableau.worksheet",
        "trino.sensor.query",
        "trino.sql",
        "vertica.seed",
        "vertica.sensor.query",
        "vertica.sensor.table",
        "vertica.source",
        "vertica.sql",
    )
)


class AssetKind(StrEnum):
    SQL = "sql"
    SEED = "seed"
    PYTHON = "python"
    NO_OP = "noop"  # duckdb.source, empty: nothing runs, nothing is checked
    ELSEWHERE = "elsewhere"  # another platform's asset: part of the graph, never run here


def kind_of(asset_type: str) -> AssetKind:
    if asset_type in PYTHON_TYPES:
        return AssetKind.PYTHON
    if asset_type in SEED_TYPES:
        return AssetKind.SEED
    if asset_type in NO_OP_TYPES:
        return AssetKind.NO_OP
    if asset_type in SQL_TYPES:
        return AssetKind.SQL
    return AssetKind.ELSEWHERE
