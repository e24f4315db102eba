CREATE MATERIALIZED VIEW top_orders WITH ('refresh_policy' = 'incremental_strict') AS
SELECT id, price FROM orders ORDER BY price DESC LIMIT 10 OFFSET 5;
