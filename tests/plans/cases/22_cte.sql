CREATE MATERIALIZED VIEW paid AS
WITH p AS (SELECT * FROM orders WHERE status = 'paid')
SELECT customer_id, SUM(price) AS paid FROM p GROUP BY customer_id;
