-- A window function over an append-only source: a new click changes the count of every click of that user, so
-- the view retracts rows (its changelog is retract, not append-only) and MIN over it keeps a multiset.
CREATE MATERIALIZED VIEW click_counts AS
SELECT user_id, url, COUNT(*) OVER (PARTITION BY user_id) AS c FROM clicks;
CREATE MATERIALIZED VIEW least_counts AS SELECT user_id, MIN(c) AS mn FROM click_counts GROUP BY user_id;
