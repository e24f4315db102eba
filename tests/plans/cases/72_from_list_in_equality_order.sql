-- A FROM list whose written neighbours share no equality (customers and products meet only through orders):
-- joined in the order of its equalities' graph (c, o, p), so no step is a cross join.
CREATE MATERIALIZED VIEW order_lines AS
SELECT c.name, p.category, o.qty
FROM customers c, products p, orders o
WHERE o.customer_id = c.id AND o.product_id = p.id;
