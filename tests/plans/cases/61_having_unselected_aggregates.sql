-- HAVING on aggregates the SELECT does not show, with and without GROUP BY.
CREATE MATERIALIZED VIEW some_orders AS SELECT COUNT(status) AS c FROM orders HAVING MAX(ts) IS NOT NULL;
CREATE MATERIALIZED VIEW busy_customers AS
SELECT customer_id, COUNT(*) AS n FROM orders GROUP BY customer_id
HAVING MIN(qty) > 0 OR SUM(price) > 10 OR AVG(qty) > 2 OR COUNT(DISTINCT status) > 1;
