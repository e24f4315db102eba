CREATE MATERIALIZED VIEW same_customer_pairs AS
SELECT a.id AS first_id, b.id AS second_id FROM orders a JOIN orders b ON a.customer_id = b.customer_id AND a.id < b.id;
