-- q5: the auctions with the most bids in each sliding window of 10 seconds (every 2 seconds). The two grouped
-- subqueries the join reads are maintained as views of their own (q5__auction_bids, q5__max_bids).
CREATE MATERIALIZED VIEW q5 AS
SELECT auction_bids.auction, auction_bids.num
FROM (SELECT auction, COUNT(*) AS num, window.start AS starttime, window.end AS endtime
      FROM bid GROUP BY auction, window(date_time, '10 seconds', '2 seconds')) AS auction_bids
JOIN (SELECT MAX(count_bids.num) AS maxn, count_bids.starttime, count_bids.endtime
      FROM (SELECT COUNT(*) AS num, window.start AS starttime, window.end AS endtime
            FROM bid GROUP BY auction, window(date_time, '10 seconds', '2 seconds')) AS count_bids
      GROUP BY count_bids.starttime, count_bids.endtime) AS max_bids
ON auction_bids.starttime = max_bids.starttime AND auction_bids.endtime = max_bids.endtime
   AND auction_bids.num >= max_bids.maxn;
