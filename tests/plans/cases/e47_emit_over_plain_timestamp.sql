-- EMIT waits for a watermark, and a window over a plain timestamp (not a WATERMARK column) has none
CREATE MATERIALIZED VIEW per_minute AS
SELECT window.end AS we, COUNT(*) AS n FROM recent AS r GROUP BY window(r.ts, '1 minute')
EMIT WHEN WATERMARK PAST we;
CREATE MATERIALIZED VIEW recent AS SELECT id, CAST(ts AS TIMESTAMP) AS ts FROM orders;
