-- Scalar subqueries in expressions, as the decision-support queries write them: each becomes a LEFT JOIN of its
-- aggregate grouped by the correlation keys, made a view of its own (<view>__scalar_1); COUNT over no rows
-- stays 0; an uncorrelated one is a one-row aggregate joined on a constant key.
CREATE MATERIALIZED VIEW small_orders AS
SELECT o.id, o.qty FROM orders o, products p
WHERE o.product_id = p.id AND p.category = 'a'
  AND o.qty < (SELECT 0.2 * AVG(qty) FROM orders i WHERE i.product_id = p.id);
CREATE MATERIALIZED VIEW orders_per_customer AS
SELECT c.id, (SELECT COUNT(*) FROM orders o WHERE o.customer_id = c.id) AS n FROM customers c;
CREATE MATERIALIZED VIEW top_products AS
SELECT product_id, SUM(price * qty) AS revenue FROM orders GROUP BY product_id
HAVING SUM(price * qty) > (SELECT SUM(price * qty) * 0.1 FROM orders);
-- Correlated by something other than an equality: recomputed in full, with the reason.
CREATE MATERIALIZED VIEW later_orders AS
SELECT o.id FROM orders o WHERE o.qty > (SELECT AVG(i.qty) FROM orders i WHERE i.ts < o.ts);
