-- a temporal join's ON holds equalities only: a filter of the dimension would change which version is valid
CREATE MATERIALIZED VIEW cheap_orders AS
SELECT o.id, p.price
FROM orders o JOIN price_history FOR SYSTEM_TIME AS OF o.ts AS p ON o.product_id = p.product_id AND p.price < 10;
