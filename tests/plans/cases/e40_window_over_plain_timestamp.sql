-- customers have no event time: a window needs a WATERMARK column
CREATE MATERIALIZED VIEW per_minute AS
SELECT window.start, COUNT(*) AS n FROM recent AS r GROUP BY window(r.ts, '1 minute');
CREATE MATERIALIZED VIEW recent AS SELECT id, CAST(ts AS TIMESTAMP) AS ts FROM orders;
