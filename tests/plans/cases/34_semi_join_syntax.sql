CREATE MATERIALIZED VIEW buyers AS SELECT c.id, c.name FROM customers c LEFT SEMI JOIN orders o ON o.customer_id = c.id;
