-- Nexmark q20 for Flink SQL, as nexmark/nexmark writes it (nexmark-flink/src/main/resources/queries/q20.sql,
-- Apache License 2.0) with mvengine's column names (date_time, item_name, ...); the INSERT's sink is the
-- runner's blackhole table.
SELECT
    auction, bidder, price, channel, url, B.date_time, B.extra,
    item_name, description, initial_bid, reserve, A.date_time, expires, seller, category, A.extra
FROM
    bid AS B INNER JOIN auction AS A on B.auction = A.id
WHERE A.category = 10;
