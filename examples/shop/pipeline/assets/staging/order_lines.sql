/* @bruin
name: staging.order_lines
type: duckdb.sql
description: Orders priced with the catalogue, one row per order.
depends:
  - raw.orders
  - ref.products
tags:
  - staging
materialization:
  type: table
  strategy: time_interval
  incremental_key: order_date
  time_granularity: date
columns:
  - name: order_id
    type: varchar
    primary_key: true
    checks:
      - name: unique
  - name: revenue
    type: double
    checks:
      - name: non_negative
custom_checks:
  - name: every order has a known product
    query: |
      SELECT count(*) FROM staging.order_lines
      WHERE order_date BETWEEN DATE '{{ start_date }}' AND DATE '{{ end_date }}' AND category IS NULL
    value: 0
@bruin */

SELECT
    o.order_id,
    o.order_date,
    o.ordered_at,
    o.product_id,
    p.category,
    o.quantity,
    o.quantity * p.unit_price AS revenue
FROM raw.orders AS o
LEFT JOIN ref.products AS p USING (product_id)
WHERE o.order_date BETWEEN DATE '{{ start_date }}' AND DATE '{{ end_date }}'
