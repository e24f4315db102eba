-- q19: the 10 highest bids of each auction (ties go to the earlier bid, then the lower bidder).
CREATE MATERIALIZED VIEW q19 AS
SELECT * FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, date_time, bidder) AS rank_number
  FROM bid) AS ranked
WHERE rank_number <= 10;
