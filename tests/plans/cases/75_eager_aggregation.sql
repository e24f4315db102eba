-- A table re-tested against a per-key aggregate (TPC-H Q17's shape): the orders are grouped by the columns the
-- query reads outside its aggregates before the join (<view>__eager_1), so a moved average re-tests one row
-- per (product, qty); the partial SUM of a decimal is cast back to SUM's type, COUNT(*) is a SUM of counts
-- (0 over no rows), and the filter on the orders alone moves into the grouped view.
CREATE MATERIALIZED VIEW small_order_revenue AS
SELECT p.category, SUM(o.price) AS revenue, SUM(o.price) / 7 AS per_week, COUNT(*) AS n
FROM orders o JOIN products p ON o.product_id = p.id
WHERE p.name LIKE 'a%' AND o.status = 'paid'
  AND o.qty < (SELECT 0.2 * AVG(i.qty) FROM orders i WHERE i.product_id = p.id)
GROUP BY p.category;
-- It stays row by row, with the reason: the query reads the orders' key (each group would be one row).
CREATE MATERIALIZED VIEW small_orders_by_id AS
SELECT o.id, SUM(o.price) AS revenue FROM orders o
WHERE o.qty < (SELECT AVG(i.qty) FROM orders i WHERE i.product_id = o.product_id)
GROUP BY o.id;
-- Against an aggregate of all rows (one row, joined on a constant key): a moved average tests every order
-- again, so the orders are grouped by (product_id, qty) too.
CREATE MATERIALIZED VIEW busy_categories AS
SELECT p.category, COUNT(*) AS n FROM orders o JOIN products p ON o.product_id = p.id
WHERE o.qty > (SELECT AVG(qty) FROM orders) GROUP BY p.category;
