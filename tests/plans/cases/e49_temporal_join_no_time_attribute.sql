-- products has no WATERMARK column: nothing dates its rows' versions
CREATE MATERIALIZED VIEW order_products AS
SELECT o.id, p.name FROM orders o JOIN products FOR SYSTEM_TIME AS OF o.ts AS p ON o.product_id = p.id;
