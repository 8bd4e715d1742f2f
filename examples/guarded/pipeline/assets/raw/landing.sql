/* @bruin
name: raw.landing
type: duckdb.sql
description: "A raw table rebuilt from one day's slice (create+replace): never allowed in a backfill."
depends:
  - raw.events
tags:
  - landing
materialization:
  type: table
@bruin */

SELECT day, event FROM raw.events WHERE day = DATE '{{ start_date }}'
