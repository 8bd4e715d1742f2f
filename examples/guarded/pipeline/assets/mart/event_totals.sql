/* @bruin
name: mart.event_totals
type: duckdb.sql
description: "The report table, merged on its key so reruns update rows in place."
depends:
  - mid.daily_events
tags:
  - safe
materialization:
  type: table
  strategy: merge
columns:
  - name: day
    type: date
    primary_key: true
  - name: events
    type: bigint
    update_on_merge: true
@bruin */

SELECT day, events FROM mid.daily_events WHERE day BETWEEN DATE '{{ start_date }}' AND DATE '{{ end_date }}'
