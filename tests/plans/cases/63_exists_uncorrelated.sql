-- Uncorrelated [NOT] EXISTS: a semi (anti) join on one constant key, maintained incrementally.
CREATE MATERIALIZED VIEW clicks_if_french AS
SELECT user_id, url FROM clicks WHERE EXISTS (SELECT 1 FROM customers WHERE country = 'FR');
CREATE MATERIALIZED VIEW clicks_unless_empty AS
SELECT user_id FROM clicks WHERE NOT EXISTS (SELECT 1 FROM products WHERE price > 100);
