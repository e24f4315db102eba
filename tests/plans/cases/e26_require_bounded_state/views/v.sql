-- A global count is bounded; a per-customer count is not.
CREATE MATERIALIZED VIEW total AS SELECT COUNT(*) AS n FROM orders;
CREATE MATERIALIZED VIEW per_customer AS SELECT customer_id, COUNT(*) AS n FROM orders GROUP BY customer_id;
