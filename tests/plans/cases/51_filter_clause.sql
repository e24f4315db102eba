CREATE MATERIALIZED VIEW paid_counts AS
SELECT customer_id, COUNT(*) FILTER (WHERE status = 'paid') AS paid FROM orders GROUP BY customer_id;
