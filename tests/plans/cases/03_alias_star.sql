CREATE MATERIALIZED VIEW cust AS SELECT c.* FROM customers AS c WHERE c.country = 'NL';
