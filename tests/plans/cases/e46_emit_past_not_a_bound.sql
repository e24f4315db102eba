-- WATERMARK PAST must name a window bound of the view
CREATE MATERIALIZED VIEW per_minute AS
SELECT url, window.end AS window_end, COUNT(*) AS n FROM clicks GROUP BY url, window(ts, '1 minute')
EMIT WHEN WATERMARK PAST n;
