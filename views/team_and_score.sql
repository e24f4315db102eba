-- Seed 002's pipeline (Streaming Systems, ch. 8): the score events projected into a table of their own,
-- then a grouped total over that view, keeping only the teams whose total passes 100 (HAVING).
CREATE MATERIALIZED VIEW team_and_score AS
SELECT team, score FROM user_scores;

CREATE MATERIALIZED VIEW large_team_totals AS
SELECT team, SUM(score) AS total
FROM team_and_score
GROUP BY team
HAVING SUM(score) > 100;
