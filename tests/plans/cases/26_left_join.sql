CREATE MATERIALIZED VIEW customer_orders AS
SELECT c.id AS customer, c.name, o.id AS order_id FROM customers c LEFT JOIN orders o ON o.customer_id = c.id;
