/* @bruin
name: raw.events
type: duckdb.sql
description: "Events as the source exposes them (a view: the backfill never rebuilds raw data)."
tags:
  - safe
materialization:
  type: view
@bruin */

SELECT CAST(d.day AS DATE) AS day, e.n AS event
FROM generate_series(TIMESTAMP '2020-01-01', TIMESTAMP '2030-12-31', INTERVAL 1 DAY) AS d(day)
CROSS JOIN generate_series(1, 20) AS e(n)
WHERE hash(CAST(d.day AS VARCHAR) || e.n) % 3 <> 0
