CREATE MATERIALIZED VIEW v AS
SELECT customer_id, status, COUNT(*) AS n FROM orders GROUP BY customer_id;
