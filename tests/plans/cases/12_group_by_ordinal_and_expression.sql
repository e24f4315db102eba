CREATE MATERIALIZED VIEW per_day AS
SELECT CAST(ts AS DATE) AS day, status, COUNT(*) AS n FROM orders GROUP BY 1, status;
