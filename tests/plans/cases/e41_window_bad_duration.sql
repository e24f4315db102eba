CREATE MATERIALIZED VIEW per_month AS
SELECT window.start, COUNT(*) AS n FROM clicks GROUP BY window(ts, '1 month');
