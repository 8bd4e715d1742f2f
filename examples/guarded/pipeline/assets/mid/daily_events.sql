/* @bruin
name: mid.daily_events
type: duckdb.sql
description: "Events per day; time_interval on day, so a partition replaces exactly its own days."
depends:
  - raw.events
tags:
  - safe
materialization:
  type: table
  strategy: time_interval
  incremental_key: day
  time_granularity: date
@bruin */

SELECT day, count(*) AS events
FROM raw.events
WHERE day BETWEEN DATE '{{ start_date }}' AND DATE '{{ end_date }}'
GROUP BY day
