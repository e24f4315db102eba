CREATE MATERIALIZED VIEW v AS
SELECT name FROM orders o JOIN customers c ON o.customer_id = c.id
  JOIN products p ON o.product_id = p.id;
