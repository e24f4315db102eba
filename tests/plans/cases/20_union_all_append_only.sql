CREATE MATERIALIZED VIEW all_clicks AS
SELECT user_id, url FROM clicks WHERE url LIKE 'https:%' UNION ALL SELECT user_id, url FROM clicks WHERE url IS NULL;
