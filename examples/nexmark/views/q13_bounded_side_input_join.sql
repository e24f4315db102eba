-- q13: bids joined with a side input by key, as the side input is when each bid arrives (a lookup join).
CREATE MATERIALIZED VIEW q13 AS
SELECT b.auction, b.bidder, b.price, b.date_time, s.value
FROM (SELECT *, PROCTIME() AS p_time FROM bid) AS b
JOIN side_input FOR SYSTEM_TIME AS OF b.p_time AS s ON b.auction % 10000 = s.key;
