-- Nexmark q17 for Flink SQL, as nexmark/nexmark writes it (nexmark-flink/src/main/resources/queries/q17.sql,
-- Apache License 2.0) with mvengine's column names (date_time, item_name, ...); the INSERT's sink is the
-- runner's blackhole table.
SELECT
     auction,
     DATE_FORMAT(date_time, 'yyyy-MM-dd') as `day`,
     count(*) AS total_bids,
     count(*) filter (where price < 10000) AS rank1_bids,
     count(*) filter (where price >= 10000 and price < 1000000) AS rank2_bids,
     count(*) filter (where price >= 1000000) AS rank3_bids,
     min(price) AS min_price,
     max(price) AS max_price,
     avg(price) AS avg_price,
     sum(price) AS sum_price
FROM bid
GROUP BY auction, DATE_FORMAT(date_time, 'yyyy-MM-dd');
