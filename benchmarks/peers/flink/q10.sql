-- Nexmark q10 for Flink SQL, as nexmark/nexmark writes it (nexmark-flink/src/main/resources/queries/q10.sql,
-- Apache License 2.0) with mvengine's column names (date_time, item_name, ...); the INSERT's sink is the
-- runner's blackhole table.
SELECT auction, bidder, price, date_time, extra, DATE_FORMAT(date_time, 'yyyy-MM-dd'), DATE_FORMAT(date_time, 'HH:mm')
FROM bid;
