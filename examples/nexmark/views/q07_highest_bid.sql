-- q7: the highest bids of each tumbling window of 10 seconds (the grouped subquery is maintained as a view of
-- its own, q7__b1).
CREATE MATERIALIZED VIEW q7 AS
SELECT b.auction, b.price, b.bidder, b.date_time, b.extra
FROM bid AS b
JOIN (SELECT MAX(price) AS maxprice, window.end AS date_time
      FROM bid GROUP BY window(date_time, '10 seconds')) AS b1
ON b.price = b1.maxprice
WHERE b.date_time BETWEEN b1.date_time - INTERVAL '10' SECOND AND b1.date_time;
