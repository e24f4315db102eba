-- The top_n pass (plan/rewrites/top_n.py): each form users write becomes a TopN.
-- A ROW_NUMBER() filtered to its first rows, per partition.
CREATE MATERIALIZED VIEW first_two AS
SELECT user_id, url, rn FROM (
  SELECT user_id, url, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts, url) AS rn FROM clicks
) AS r WHERE rn <= 2;
-- Deduplication: the first row per key, the rank not selected.
CREATE MATERIALIZED VIEW last_click AS
SELECT user_id, url, ts FROM (
  SELECT user_id, url, ts, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts DESC, url) AS rn FROM clicks
) AS r WHERE rn = 1;
-- ORDER BY ... LIMIT over the whole query: a TopN of one partition.
CREATE MATERIALIZED VIEW biggest AS SELECT id, qty FROM orders ORDER BY qty DESC, id LIMIT 3;
-- A rank that is not filtered stays a window function (the over_windows pass takes it).
CREATE MATERIALIZED VIEW ranked AS
SELECT id, customer_id, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY ts DESC) AS rn FROM orders;
