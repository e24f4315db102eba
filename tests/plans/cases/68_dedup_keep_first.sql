-- Deduplication keeping the first row per key by arrival (Flink's keep-first pattern) over an append-only
-- source: a later row never ranks before an earlier one, so the view only ever gains rows (append-only).
CREATE MATERIALIZED VIEW first_click AS
SELECT user_id, url FROM (
  SELECT user_id, url, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY PROCTIME()) AS rn FROM clicks
) AS r WHERE rn = 1;
