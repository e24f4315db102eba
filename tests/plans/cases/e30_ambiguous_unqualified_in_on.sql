CREATE MATERIALIZED VIEW v AS SELECT o.id FROM orders o JOIN customers c ON customer_id = id;
