-- Columns written without AS are named as Spark names them (issue 35, item 7): the expression in Spark's SQL.
CREATE MATERIALIZED VIEW unnamed_aggregates AS
SELECT customer_id, sum(qty), COUNT(*), avg(price * 2), max(status), count(DISTINCT product_id)
FROM orders GROUP BY customer_id;
CREATE MATERIALIZED VIEW unnamed_expressions AS
SELECT id, qty * 2, upper(status), CAST(customer_id AS INT), price IS NULL, -qty, qty IN (1, 2),
       CASE WHEN qty > 1 THEN 'many' ELSE 'one' END, coalesce(status, 'none'), 'x', 3
FROM orders;
