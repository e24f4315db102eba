-- Nexmark q0 for Flink SQL, as nexmark/nexmark writes it (nexmark-flink/src/main/resources/queries/q0.sql,
-- Apache License 2.0) with mvengine's column names (date_time, item_name, ...); the INSERT's sink is the
-- runner's blackhole table.
SELECT auction, bidder, price, date_time, extra FROM bid;
