CREATE MATERIALIZED VIEW visitors AS
SELECT url, COUNT(DISTINCT user_id) AS users, SUM(DISTINCT user_id) AS id_sum FROM clicks GROUP BY url;
