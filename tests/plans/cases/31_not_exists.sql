CREATE MATERIALIZED VIEW idle_customers AS
SELECT id, name FROM customers c WHERE NOT EXISTS (SELECT * FROM orders o WHERE o.customer_id = c.id);
