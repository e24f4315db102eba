-- A filter on a scalar subquery over an updatable source: when a customer id changes, clicks that passed the
-- filter stop passing it, so the view is not append-only though clicks is.
CREATE MATERIALIZED VIEW known_clicks AS
SELECT user_id, url FROM clicks WHERE user_id >= (SELECT MIN(id) FROM customers);
CREATE MATERIALIZED VIEW least_user AS SELECT url, MIN(user_id) AS lo FROM known_clicks GROUP BY url;
