CREATE MATERIALIZED VIEW per_minute AS
SELECT window.end, COUNT(*) AS n FROM clicks GROUP BY window(ts, '1 minute')
EMIT WHEN WATERMARK PASSES window.end;
