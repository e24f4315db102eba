CREATE MATERIALIZED VIEW every_pair AS SELECT c.id AS customer, p.id AS product FROM customers c CROSS JOIN products p;
