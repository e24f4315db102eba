CREATE MATERIALIZED VIEW `x``; DROP TABLE customers; --` AS SELECT id FROM customers;
