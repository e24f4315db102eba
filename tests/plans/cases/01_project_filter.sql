CREATE MATERIALIZED VIEW big_orders AS
SELECT id, customer_id, qty * price AS amount, UPPER(status) AS status
FROM orders WHERE qty > 10 AND status <> 'cancelled';
