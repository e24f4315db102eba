-- ts stays an event-time attribute through filter and projection
CREATE MATERIALIZED VIEW recent_clicks AS SELECT user_id, ts FROM clicks WHERE url IS NOT NULL;
