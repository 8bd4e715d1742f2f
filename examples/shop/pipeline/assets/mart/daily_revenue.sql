/* @bruin
name: mart.daily_revenue
type: duckdb.sql
description: Revenue and order count per day and category; merged so re-runs update in place.
depends:
  - staging.order_lines
tags:
  - mart
materialization:
  type: table
  strategy: merge
columns:
  - name: order_date
    type: date
    primary_key: true
  - name: category
    type: varchar
    primary_key: true
  - name: orders
    type: integer
    update_on_merge: true
    checks:
      - name: positive
  - name: revenue
    type: double
    update_on_merge: true
    checks:
      - name: non_negative
@bruin */

SELECT
    order_date,
    category,
    CAST(count(*) AS INTEGER) AS orders,
    round(sum(revenue), 2) AS revenue
FROM staging.order_lines
WHERE order_date BETWEEN DATE '{{ start_date }}' AND DATE '{{ end_date }}'
GROUP BY order_date, category
