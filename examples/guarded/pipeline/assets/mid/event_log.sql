/* @bruin
name: mid.event_log
type: duckdb.sql
description: "An append-only log: rerunning a day that is already logged would log it twice (approval)."
depends:
  - mid.daily_events
tags:
  - append
materialization:
  type: table
  strategy: append
  incremental_key: day
@bruin */

SELECT day, events FROM mid.daily_events WHERE day BETWEEN DATE '{{ start_date }}' AND DATE '{{ end_date }}'
