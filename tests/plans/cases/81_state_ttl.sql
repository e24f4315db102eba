-- A key untouched for the TTL leaves the view with its state; one that comes back is counted again from its
-- input rows (state_ttl): a GROUP BY over a join, and a DISTINCT.
CREATE MATERIALIZED VIEW active_customers WITH ('state_ttl' = '7 days') AS
SELECT o.customer_id, c.country, COUNT(*) AS orders, MAX(o.price) AS top_price
FROM orders o JOIN customers c ON o.customer_id = c.id
GROUP BY o.customer_id, c.country;

CREATE MATERIALIZED VIEW recent_urls WITH ('state_ttl' = '36 hours') AS
SELECT DISTINCT url FROM clicks;
