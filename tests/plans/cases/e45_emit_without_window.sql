-- EMIT needs an event-time window: this view has none
CREATE MATERIALIZED VIEW totals AS
SELECT status, COUNT(*) AS n FROM orders GROUP BY status
EMIT AFTER INTERVAL '1' MINUTE;
