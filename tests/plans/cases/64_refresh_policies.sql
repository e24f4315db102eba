-- Each refresh policy: auto (the default), incremental, incremental_strict, and full (recomputed although
-- the query has a delta rule).
CREATE MATERIALIZED VIEW by_status AS SELECT status, COUNT(*) AS n FROM orders GROUP BY status;
CREATE MATERIALIZED VIEW by_status_kept WITH ('refresh_policy' = 'incremental') AS
SELECT status, COUNT(*) AS n FROM orders GROUP BY status;
CREATE MATERIALIZED VIEW by_status_strict WITH ('refresh_policy' = 'INCREMENTAL_STRICT') AS
SELECT status, COUNT(*) AS n FROM orders GROUP BY status;
CREATE MATERIALIZED VIEW by_status_full WITH ('refresh_policy' = 'full') AS
SELECT status, COUNT(*) AS n FROM orders GROUP BY status;
