-- q13: bids joined with a side input by key.
CREATE MATERIALIZED VIEW q13 AS
SELECT b.auction, b.bidder, b.price, b.date_time, s.value
FROM bid AS b JOIN side_input AS s ON b.auction % 10000 = s.key;
