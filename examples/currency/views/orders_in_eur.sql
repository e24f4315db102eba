-- A temporal join (Flink's currency example): each order at the rate of its currency valid at the order's
-- time. A later rate leaves it as it is; a rate that arrives late, dated before the order, moves it.
CREATE MATERIALIZED VIEW orders_in_eur AS
SELECT o.id, o.customer, o.currency, o.amount, r.rate, o.amount * r.rate AS amount_eur, o.ts, r.ts AS rate_ts
FROM orders o
JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency;
