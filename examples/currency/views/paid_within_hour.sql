-- An interval join (Nexmark-style): the payments made within an hour after their order.
CREATE MATERIALIZED VIEW paid_within_hour AS
SELECT o.id AS order_id, o.customer, p.id AS payment_id, p.paid, unix_seconds(p.ts) - unix_seconds(o.ts) AS seconds_to_pay
FROM orders o
JOIN payments p ON p.order_id = o.id AND p.ts BETWEEN o.ts AND o.ts + INTERVAL '1' HOUR;
