/* @bruin
name: raw.orders
type: duckdb.sql
description: >
  Orders as the source system would send them: a deterministic function of the
  minute, so any window can be (re)loaded and always yields the same rows.
owner: data-platform@example.com
tags:
  - raw
materialization:
  type: table
  strategy: time_interval
  incremental_key: ordered_at
  time_granularity: timestamp
columns:
  - name: order_id
    type: varchar
    primary_key: true
    checks:
      - name: not_null
      - name: unique
  - name: ordered_at
    type: timestamp
    checks:
      - name: not_null
  - name: product_id
    type: integer
    checks:
      - name: not_null
  - name: quantity
    type: integer
    checks:
      - name: positive
@bruin */

SELECT
    'o-' || strftime(minute, '%Y%m%d%H%M') AS order_id,
    minute AS ordered_at,
    CAST(1 + hash(strftime(minute, '%Y%m%d%H%M') || 'product') % 20 AS INTEGER) AS product_id,
    CAST(1 + hash(strftime(minute, '%Y%m%d%H%M') || 'quantity') % 4 AS INTEGER) AS quantity
FROM generate_series(
    TIMESTAMP '{{ start_datetime }}',
    TIMESTAMP '{{ end_datetime }}',
    INTERVAL 1 MINUTE
) AS t(minute)
WHERE hash(strftime(minute, '%Y%m%d%H%M')) % {{ var.one_order_in }} = 0
