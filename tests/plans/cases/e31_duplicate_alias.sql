CREATE MATERIALIZED VIEW v AS SELECT o.id FROM orders o JOIN customers o ON o.customer_id = o.id;
