CREATE MATERIALIZED VIEW sampled AS SELECT id, rand() AS r FROM orders WHERE ts > current_timestamp() - INTERVAL '1' HOUR;
