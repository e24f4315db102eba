CREATE MATERIALIZED VIEW dutch_orders AS
SELECT id, qty FROM orders WHERE customer_id IN (SELECT id FROM customers WHERE country = 'NL');
