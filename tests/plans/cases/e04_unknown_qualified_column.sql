CREATE MATERIALIZED VIEW v AS
SELECT c.id, c.contry FROM customers c;
