-- each order at the price its product had at the order's time; an order with no price yet keeps NULLs
CREATE MATERIALIZED VIEW order_prices AS
SELECT o.id, o.qty, p.price, o.qty * p.price AS amount
FROM orders o LEFT JOIN price_history FOR SYSTEM_TIME AS OF o.ts AS p ON o.product_id = p.product_id;
