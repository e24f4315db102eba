CREATE MATERIALIZED VIEW avg_per_customer AS
SELECT AVG(n) AS avg_orders
FROM (SELECT customer_id, COUNT(*) AS n FROM orders GROUP BY customer_id) AS per_customer;
