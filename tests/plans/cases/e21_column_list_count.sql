CREATE MATERIALIZED VIEW v (a, b, c) AS SELECT id, name FROM customers;
