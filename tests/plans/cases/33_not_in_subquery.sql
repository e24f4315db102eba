CREATE MATERIALIZED VIEW unsold AS SELECT id FROM products WHERE id NOT IN (SELECT product_id FROM orders);
