-- q18: each bidder's last bid on each auction (deduplication, keep the last).
CREATE MATERIALIZED VIEW q18 AS
SELECT auction, bidder, price, channel, url, date_time, extra
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY date_time DESC, price DESC) AS rank_number
      FROM bid) AS ranked
WHERE rank_number <= 1;
