CREATE MATERIALIZED VIEW big_customers AS
SELECT customer_id, SUM(qty) AS qty FROM orders GROUP BY customer_id HAVING SUM(qty) > 100 AND COUNT(*) > 2;
