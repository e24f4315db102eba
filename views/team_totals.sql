-- A grouped aggregate: one row per team, updated (-U/+U) as scores arrive.
-- Its changelog is the STREAM rendering of Streaming Systems, chapter 8: `mv changes team_totals` shows the undo rows.
CREATE MATERIALIZED VIEW team_totals AS
SELECT team, SUM(score) AS total, COUNT(*) AS n
FROM user_scores
GROUP BY team;
