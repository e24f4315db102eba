CREATE MATERIALIZED VIEW first_click AS
SELECT user_id, MIN(ts) AS first_ts, MAX(ts) AS last_ts, COUNT(url) AS n FROM clicks GROUP BY user_id;
