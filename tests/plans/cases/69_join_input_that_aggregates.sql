-- A subquery in FROM that aggregates, joined: it becomes a view of its own (big_spenders__t), and both are
-- incremental. The same subquery as a CTE does too (big_spenders_cte__totals), and leaves the WITH.
CREATE MATERIALIZED VIEW big_spenders AS
SELECT c.name, t.spent
FROM customers AS c
JOIN (SELECT customer_id, SUM(price) AS spent FROM orders GROUP BY customer_id) AS t
  ON c.id = t.customer_id
WHERE t.spent > 100;
CREATE MATERIALIZED VIEW big_spenders_cte AS
WITH totals AS (SELECT customer_id, SUM(price) AS spent FROM orders GROUP BY customer_id)
SELECT c.name, t.spent FROM customers AS c JOIN totals AS t ON c.id = t.customer_id;
