-- A grouped aggregate: one row per team, updated (-U/+U) as scores arrive.
-- (Refreshed once the refresh milestone lands; `mv plan` shows how.)
CREATE MATERIALIZED VIEW team_totals AS
SELECT team, SUM(score) AS total, COUNT(*) AS n
FROM user_scores
GROUP BY team;
