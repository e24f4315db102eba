-- ROW_NUMBER top-N and deduplication over an append-only source: a newer click replaces a user's last one,
-- a third click pushes one out of the top 2. Both retract rows.
CREATE MATERIALIZED VIEW last_click AS
SELECT user_id, url, ts FROM (
  SELECT user_id, url, ts, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts DESC, url) AS rn FROM clicks
) AS r WHERE rn = 1;
CREATE MATERIALIZED VIEW first_two AS
SELECT user_id, url, rn FROM (
  SELECT user_id, url, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts, url) AS rn FROM clicks
) AS r WHERE rn <= 2;
CREATE MATERIALIZED VIEW latest_per_user AS SELECT user_id, MAX(ts) AS ts FROM last_click GROUP BY user_id;
