/* @bruin
name: raw.orders
type: duckdb.sql
description: >
  Orders as the source system exposes them: a view over a deterministic function of
  the minute, so every window always yields the same rows. Raw data is read, never
  rebuilt by a backfill: the view filters by order_date cheaply (DuckDB pushes the
  filter into the day series), and the backfill only re-creates its definition.
owner: data-platform@example.com
tags:
  - raw
materialization:
  type: view
columns:
  - name: order_id
    type: varchar
    primary_key: true
  - name: order_date
    type: date
  - name: ordered_at
    type: timestamp
  - name: product_id
    type: integer
  - name: quantity
    type: integer
@bruin */

SELECT
    'o-' || strftime(ordered_at, '%Y%m%d%H%M') AS order_id,
    order_date,
    ordered_at,
    CAST(1 + hash(strftime(ordered_at, '%Y%m%d%H%M') || 'product') % 20 AS INTEGER) AS product_id,
    CAST(1 + hash(strftime(ordered_at, '%Y%m%d%H%M') || 'quantity') % 4 AS INTEGER) AS quantity
FROM (
    SELECT CAST(d.day AS DATE) AS order_date, d.day + m.minute * INTERVAL 1 MINUTE AS ordered_at
    FROM generate_series(TIMESTAMP '2020-01-01', TIMESTAMP '2030-12-31', INTERVAL 1 DAY) AS d(day)
    CROSS JOIN generate_series(0, 1439) AS m(minute)
)
WHERE hash(strftime(ordered_at, '%Y%m%d%H%M')) % {{ var.one_order_in }} = 0
