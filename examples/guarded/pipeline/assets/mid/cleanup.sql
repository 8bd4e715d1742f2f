/* @bruin
name: mid.cleanup
type: duckdb.sql
description: "A statement run as written (no materialization): what it does to data cannot be judged (human-only)."
depends:
  - mid.daily_events
tags:
  - adhoc
@bruin */

DELETE FROM mid.daily_events WHERE events < 0 AND day BETWEEN DATE '{{ start_date }}' AND DATE '{{ end_date }}'
