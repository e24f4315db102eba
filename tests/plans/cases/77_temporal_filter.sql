CREATE MATERIALIZED VIEW recent_orders AS
SELECT customer_id, COUNT(*) AS n FROM orders WHERE ts > NOW() - INTERVAL '1' HOUR GROUP BY customer_id;
