-- A grouped aggregate: one row per team, updated (-U/+U) as scores arrive.
-- (Views are planned and refreshed once the SQL/plan and refresh issues land.)
CREATE MATERIALIZED VIEW team_totals AS
SELECT team, SUM(score) AS total, COUNT(*) AS n
FROM user_scores
GROUP BY team;
