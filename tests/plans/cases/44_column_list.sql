CREATE MATERIALIZED VIEW renamed (customer, orders) AS
SELECT customer_id, COUNT(*) FROM orders GROUP BY customer_id;
