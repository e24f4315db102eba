CREATE MATERIALIZED VIEW v WITH ('paht' = 'x') AS SELECT id FROM customers;
