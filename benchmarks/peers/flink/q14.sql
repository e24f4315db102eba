-- Nexmark q14 for Flink SQL, as nexmark/nexmark writes it (nexmark-flink/src/main/resources/queries/q14.sql,
-- Apache License 2.0) with mvengine's column names (date_time, item_name, ...); the INSERT's sink is the
-- runner's blackhole table.
-- count_char(extra, 'c'), a Java function of Nexmark's, written as CHAR_LENGTH arithmetic (as ours is).
SELECT 
    auction,
    bidder,
    0.908 * price as price,
    CASE
        WHEN HOUR(date_time) >= 8 AND HOUR(date_time) <= 18 THEN 'dayTime'
        WHEN HOUR(date_time) <= 6 OR HOUR(date_time) >= 20 THEN 'nightTime'
        ELSE 'otherTime'
    END AS bidTimeType,
    date_time,
    extra,
    CHAR_LENGTH(extra) - CHAR_LENGTH(REPLACE(extra, 'c', '')) AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000;
