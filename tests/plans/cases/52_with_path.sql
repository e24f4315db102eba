CREATE MATERIALIZED VIEW placed WITH ('path' = 'elsewhere/placed') AS SELECT id FROM customers;
