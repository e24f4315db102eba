-- A join of the score events with the users table (keyed, updated in place), grouped by country.
-- Incremental: a new score joins its user's current row, and a user who moves country moves their points.
CREATE MATERIALIZED VIEW scores_by_country AS
SELECT u.country, SUM(s.score) AS total, COUNT(*) AS scores
FROM user_scores s JOIN users u ON s.name = u.name
GROUP BY u.country;
