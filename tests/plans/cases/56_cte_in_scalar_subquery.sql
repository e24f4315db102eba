CREATE MATERIALIZED VIEW cheap_products AS
WITH priced AS (SELECT id, price FROM products WHERE price IS NOT NULL)
SELECT id FROM priced WHERE price < (SELECT AVG(price) FROM priced);
