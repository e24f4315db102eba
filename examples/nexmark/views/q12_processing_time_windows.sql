-- q12: how many bids each bidder makes per 10 seconds of processing time (PROCTIME(): when the bid arrived).
CREATE MATERIALIZED VIEW q12 AS
SELECT bidder, COUNT(*) AS bid_count, window.start AS starttime, window.end AS endtime
FROM (SELECT *, PROCTIME() AS p_time FROM bid) AS b
GROUP BY bidder, window(p_time, '10 seconds');
