CREATE MATERIALIZED VIEW both_names AS
SELECT id, c.name AS customer_name, p.name AS product_name FROM customers c FULL OUTER JOIN products p USING (id);
