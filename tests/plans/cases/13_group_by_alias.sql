CREATE MATERIALIZED VIEW per_bucket AS
SELECT qty DIV 10 AS bucket, SUM(price) AS revenue FROM orders GROUP BY bucket;
