-- A window over a timestamp that is not an event-time attribute (a view's CAST): rows are windowed as Spark
-- windows them, without a watermark (no _emit_timing; EMIT and allowed_lateness need a WATERMARK column).
CREATE MATERIALIZED VIEW per_minute AS
SELECT window.start, COUNT(*) AS n FROM recent AS r GROUP BY window(r.ts, '1 minute');
CREATE MATERIALIZED VIEW recent AS SELECT id, CAST(ts AS TIMESTAMP) AS ts FROM orders;
