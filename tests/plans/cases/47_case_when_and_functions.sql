CREATE MATERIALIZED VIEW labelled AS
SELECT id,
       CASE WHEN qty > 100 THEN 'bulk' WHEN qty > 10 THEN 'medium' ELSE 'small' END AS size,
       date_trunc('HOUR', ts) AS hour, year(ts) AS y, coalesce(status, 'unknown') AS status,
       CAST(price AS DOUBLE) / 2 AS half
FROM orders;
