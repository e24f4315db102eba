-- A DISTINCT over a keyed source with updates: the countries users play from.
-- A country appears (+I) with its first user and goes away (-D) when its last user moves or leaves.
CREATE MATERIALIZED VIEW countries AS
SELECT DISTINCT country FROM users;
