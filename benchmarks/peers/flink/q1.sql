-- Nexmark q1 for Flink SQL, as nexmark/nexmark writes it (nexmark-flink/src/main/resources/queries/q1.sql,
-- Apache License 2.0) with mvengine's column names (date_time, item_name, ...); the INSERT's sink is the
-- runner's blackhole table.
SELECT
    auction,
    bidder,
    0.908 * price as price, -- convert dollar to euro
    date_time,
    extra
FROM bid;
