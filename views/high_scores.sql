-- A projection and filter: only scores of 50 and more, with a computed column.
-- Applied to each change as it comes; no state is kept.
CREATE MATERIALIZED VIEW high_scores AS
SELECT name, team, score, ts, CASE WHEN score >= 90 THEN 'legendary' ELSE 'high' END AS tier
FROM user_scores
WHERE score >= 50;
