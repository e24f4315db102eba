-- Event-time windows in each form users write: Spark's window(), Calcite's group windows, Flink's
-- table-valued functions. Tumbling and hopping windows are incremental; the window is part of the key.
CREATE MATERIALIZED VIEW clicks_per_minute AS
SELECT url, window.start, window.end, COUNT(*) AS n FROM clicks GROUP BY url, window(ts, '1 minute');

CREATE MATERIALIZED VIEW clicks_sliding AS
SELECT window.start AS ws, COUNT(*) AS n FROM clicks GROUP BY window(ts, '10 minutes', '5 minutes');

CREATE MATERIALIZED VIEW orders_calcite AS
SELECT status, TUMBLE_START(ts, INTERVAL '2' MINUTE) AS ws, TUMBLE_END(ts, INTERVAL '2' MINUTE) AS we,
       SUM(qty) AS qty
FROM orders GROUP BY status, TUMBLE(ts, INTERVAL '2' MINUTE);

CREATE MATERIALIZED VIEW clicks_tvf AS
SELECT user_id, window_start, window_end, COUNT(*) AS n
FROM TABLE(HOP(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '5' MINUTE))
GROUP BY user_id, window_start, window_end;

-- Session windows merge as rows arrive: recomputed in full.
CREATE MATERIALIZED VIEW click_sessions AS
SELECT user_id, SESSION_START(ts, INTERVAL '30' MINUTE) AS started, COUNT(*) AS clicks
FROM clicks GROUP BY user_id, SESSION(ts, INTERVAL '30' MINUTE);
