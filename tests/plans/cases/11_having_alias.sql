CREATE MATERIALIZED VIEW busy AS
SELECT customer_id, COUNT(*) AS n FROM orders GROUP BY customer_id HAVING n >= 10;
