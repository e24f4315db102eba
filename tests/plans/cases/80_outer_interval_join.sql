-- each click with the orders of its user in the hour before it, and a click with none padded (it leaves the view
-- when such an order arrives): whether a click is padded is counted click by click
CREATE MATERIALIZED VIEW clicks_orders AS
SELECT c.url, c.ts, o.id AS order_id
FROM clicks c LEFT JOIN orders o
ON o.customer_id = c.user_id AND o.ts BETWEEN c.ts - INTERVAL '1' HOUR AND c.ts;
