CREATE MATERIALIZED VIEW customers_with_orders AS
SELECT c.id, c.name FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id AND o.qty > 0);
