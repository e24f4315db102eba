CREATE MATERIALIZED VIEW v AS
SELECT o.id, c.id FROM orders o JOIN customers c ON o.customer_id = c.id;
