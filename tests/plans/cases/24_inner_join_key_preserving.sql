-- Each order has at most one customer (customers.id is a key), so the order id stays the key.
CREATE MATERIALIZED VIEW order_details AS
SELECT o.id, o.qty, c.name, c.country
FROM orders o JOIN customers c ON o.customer_id = c.id;
