-- Nexmark q12 for Flink SQL, as nexmark/nexmark writes it (nexmark-flink/src/main/resources/queries/q12.sql,
-- Apache License 2.0) with mvengine's column names (date_time, item_name, ...); the INSERT's sink is the
-- runner's blackhole table.
CREATE TEMPORARY VIEW B AS SELECT *, PROCTIME() AS p_time FROM bid;
SELECT
    bidder,
    count(*) as bid_count,
    window_start AS starttime,
    window_end AS endtime
FROM TABLE(
        TUMBLE(TABLE B, DESCRIPTOR(p_time), INTERVAL '10' SECOND))
GROUP BY bidder, window_start, window_end;
