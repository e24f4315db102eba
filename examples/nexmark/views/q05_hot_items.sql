-- q5: the auctions with the most bids in each sliding window of 10 seconds (every 2 seconds). The two grouped
-- inputs of the join are views of their own: a join's inputs are maintained incrementally when they are
-- sources or views (mv plan says so when a subquery is not).
CREATE MATERIALIZED VIEW q5_bids_per_window AS
SELECT auction, COUNT(*) AS num, window.start AS starttime, window.end AS endtime
FROM bid GROUP BY auction, window(date_time, '10 seconds', '2 seconds');

CREATE MATERIALIZED VIEW q5_most_per_window AS
SELECT MAX(num) AS maxn, starttime, endtime FROM q5_bids_per_window GROUP BY starttime, endtime;

CREATE MATERIALIZED VIEW q5 AS
SELECT b.auction, b.num
FROM q5_bids_per_window AS b
JOIN q5_most_per_window AS m ON b.starttime = m.starttime AND b.endtime = m.endtime AND b.num >= m.maxn;
