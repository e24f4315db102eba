CREATE MATERIALIZED VIEW by_status WITH ('refresh_policy' = 'sometimes') AS
SELECT status, COUNT(*) AS n FROM orders GROUP BY status;
