-- A key untouched for the TTL leaves the view with its state; one that comes back is counted again from its
-- input rows (state_ttl): a GROUP BY over a join, a DISTINCT, and a top-N, a window function and a session
-- window (their partitions are their keys).
CREATE MATERIALIZED VIEW active_customers WITH ('state_ttl' = '7 days') AS
SELECT o.customer_id, c.country, COUNT(*) AS orders, MAX(o.price) AS top_price
FROM orders o JOIN customers c ON o.customer_id = c.id
GROUP BY o.customer_id, c.country;

CREATE MATERIALIZED VIEW recent_urls WITH ('state_ttl' = '36 hours') AS
SELECT DISTINCT url FROM clicks;

CREATE MATERIALIZED VIEW latest_urls WITH ('state_ttl' = '2 hours') AS
SELECT user_id, url, ts FROM (
  SELECT user_id, url, ts, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts DESC) AS rn FROM clicks
) WHERE rn <= 3;

CREATE MATERIALIZED VIEW running_clicks WITH ('state_ttl' = '1 hour') AS
SELECT user_id, url, COUNT(*) OVER (PARTITION BY user_id ORDER BY ts) AS clicks_so_far FROM clicks;

CREATE MATERIALIZED VIEW user_sessions WITH ('state_ttl' = '1 day') AS
SELECT user_id, session_window.start AS session_start, COUNT(*) AS clicks
FROM clicks GROUP BY user_id, session_window(ts, '30 minutes');
