-- q9: the winning bid of each auction (top-1 per auction; ties go to the earlier bid, then the lower bidder).
CREATE MATERIALIZED VIEW q9 AS
SELECT id, item_name, description, initial_bid, reserve, date_time, expires, seller, category,
       auction, bidder, price, bid_date_time
FROM (SELECT a.*, b.auction, b.bidder, b.price, b.date_time AS bid_date_time,
             ROW_NUMBER() OVER (PARTITION BY a.id ORDER BY b.price DESC, b.date_time, b.bidder) AS rownum
      FROM auction AS a JOIN bid AS b ON a.id = b.auction
      WHERE b.date_time BETWEEN a.date_time AND a.expires) AS ranked
WHERE rownum <= 1;
