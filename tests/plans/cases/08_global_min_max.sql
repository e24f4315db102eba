CREATE MATERIALIZED VIEW extremes AS SELECT MIN(price) AS lo, MAX(price) AS hi FROM orders;
