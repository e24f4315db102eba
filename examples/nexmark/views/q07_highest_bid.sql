-- q7: the highest bids of each tumbling window of 10 seconds (the window's highest price is a view of its own,
-- joined back to the bids).
CREATE MATERIALIZED VIEW q7_highest_per_window AS
SELECT MAX(price) AS maxprice, window.end AS date_time FROM bid GROUP BY window(date_time, '10 seconds');

CREATE MATERIALIZED VIEW q7 AS
SELECT b.auction, b.price, b.bidder, b.date_time, b.extra
FROM bid AS b JOIN q7_highest_per_window AS b1 ON b.price = b1.maxprice
WHERE b.date_time BETWEEN b1.date_time - INTERVAL '10' SECOND AND b1.date_time;
