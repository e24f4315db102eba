-- A grouped aggregate: key = the GROUP BY columns.
CREATE MATERIALIZED VIEW per_customer AS
SELECT customer_id, COUNT(*) AS n, SUM(qty) AS qty, SUM(price) AS revenue, AVG(price) AS avg_price
FROM orders GROUP BY customer_id;
