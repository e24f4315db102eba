CREATE MATERIALIZED VIEW order_products AS
SELECT o.id, p.name, o.qty * p.price AS amount FROM orders o, products p WHERE o.product_id = p.id AND p.price > 1;
